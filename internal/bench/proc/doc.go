// Package proc owns the processes queenbench starts and measures: what
// --self runs (a PostgreSQL unless one is given, a nats-server mapping
// pushes onto the gateways' routing shards, and a fleet of queengate
// processes, resized per target), the roles queenbench re-executes itself
// in (the nats-server here, others added by scenarios; PlayRole) so that a
// server's or a client's CPU and memory are not mixed with the load
// generator's, and reading a process's CPU and peak memory from /proc.
package proc
