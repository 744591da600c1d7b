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
// The words are the project's (docs/design.md, "Words": request, result,
// frame, bundle, flush, shard); these are ingest's own:
//
//   - buffer: a partition's fusion buffer in its shard (buffer.go):
//     requests fused in arrival order, each message's leader marked; a
//     flush makes it a frame (the leaders only when the window is on).
//   - in flight: a bundle from its flush until its answers are handed out.
//   - leader and follower: the first occurrence of a transactionId in a
//     buffer, and the repeats that inherit its result.
//   - vouch: the cache's promise that nothing in a frame is stored at or
//     below a watermark except where it says (candidates), so SQL may
//     skip or narrow its probe.
package ingest
