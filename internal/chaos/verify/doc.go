// Package verify is queenchaos's verifier: after a chaos run it reads a
// queue's log, its groups' cursors and its dead-letter queue back from
// PostgreSQL with its own SQL and checks them against what the producers
// sent and were answered (Verify) and what the consumers saw (Consumed):
// nothing lost, nothing stored twice, every answer true, no delivery
// outside its lease. After failovers under asynchronous replication
// (VerifyFailovers) it counts what the failovers lost instead, and still
// judges everything they cannot explain (verify_failover.go), the
// gateways' reports of what was lost included (lostreport.go). It shares
// no code with the gateway on purpose (pgx only): a bug in the gateway's
// reading of its own log must not hide a bug in its writing. It imports nothing of this module; cmd/queenchaos
// records the run in its terms.
package verify
