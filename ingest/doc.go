// Package ingest turns requests into committed frames: it routes each
// request to the shard that owns its partition, fuses requests into a
// buffer per partition, resolves repeats inside a buffer (layer 1 by
// queue\x1fpartition\x1ftransactionId, layer 2 by the 16-byte hash; the first
// occurrence leads and later ones follow its final result), and flushes a
// shard's ready partitions as one bundle: one transaction, one round trip.
//
// Flushes of one partition are single-flight: while one is in flight, new
// arrivals wait for the next, so arrival order is offset order. Every
// buffer is bounded; a request that does not fit is refused at once with
// ErrOverloaded, never queued without bound and never dropped.
//
// Words, one per thing:
//
//   - request: one producer's push (one NATS message), for one partition:
//     a Request, answered once with a Result per message.
//   - buffer: a partition's fusion buffer in its shard (buffer.go):
//     requests fused in arrival order, each message's leader marked.
//   - frame: a buffer as sent to PostgreSQL (model.Frame), the leaders
//     only when the window is on; stored as one log_segments row.
//   - bundle: one flush of a shard (bundle.go): the oldest buffer of every
//     ready partition, as frames in one statement and one transaction. It
//     is "in flight" from the flush until its answers are handed out.
//   - leader and follower: the first occurrence of a transactionId in a
//     buffer, and the repeats that inherit its result.
//   - vouch: the cache's promise that nothing in a frame is stored at or
//     below a watermark except where it says (candidates), so SQL may
//     skip or narrow its probe.
package ingest
