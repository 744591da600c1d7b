// Package dedup is the broker's deduplication cache (docs/design.md, "The
// broker cache"): per partition, the in-window hashes in a time-ordered
// ring of immutable sorted blocks plus one arrival-order hot buffer,
// fronted by a ring of generational blocked bloom filters.
//
// Its one load-bearing output is the watermark a push may vouch for: "none
// of these hashes occurs at or below this offset". A local hit is only a
// hint: the caller sends that frame with -1 for the exact verdict in SQL.
//
// The package does no I/O and imports nothing of queengate: it is handed
// hydration results and push results.
package dedup
