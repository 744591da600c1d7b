// Package floor measures what one consume cycle cannot cost less than on
// a machine, whatever queengate does: a NATS request answered by another
// client (the pop's trip through nats-server and back, with an answer of
// a batch's size) and one single-row UPDATE committed in PostgreSQL (the
// least a durable cycle writes). Its benchmarks report CPU microseconds
// per operation, every process counted, beside queenbench's per-process
// split of the real cycle (docs/benchmarks.md, "Consuming").
package floor
