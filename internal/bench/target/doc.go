// Package target owns the systems queenbench measures, each a
// bench.Target sent the same batches: queengate (through NATS, with its
// figures from the gateways' /metrics or /proc, and, given PostgreSQL,
// what it stored), JetStream's own deduplication (a server process of
// its own), naive (a row per message under a unique index in PostgreSQL)
// and the ceiling (each batch one row in queengate's frame layout,
// deduplicating nothing).
package target
