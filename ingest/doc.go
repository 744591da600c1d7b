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
package ingest
