// Package world is queenchaos's world of processes and the faults done
// to them: PostgreSQL behind a TCP proxy that can freeze and cut, or a
// primary and a streaming standby that Failover swaps as a failover
// manager would (failover.go); a NATS cluster whose servers restart on
// their ports; and queengate processes that can be killed, stopped,
// paused and started again. It starts them, breaks them, and reads the
// gateways' memory and counters; what a run offers them and what it
// makes of their answers is cmd/queenchaos's. It imports routing (the
// shard mapping every NATS server carries), internal/pgcluster,
// internal/tcpproxy and internal/chaos/verify (what a standby held at a
// promotion), never cmd/queenchaos.
package world
