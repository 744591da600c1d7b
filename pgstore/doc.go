// Package pgstore owns the PostgreSQL side of queengate: the schema and its
// embedded migrations, the exact push (probe under the partition row lock,
// then allocate), bundles of pushes in one transaction, the hydration read
// for the broker cache, and queue configuration rows.
//
// PostgreSQL is the authority on duplicates. Every function here is exact
// on its own, whatever watermark the caller vouches for; the broker cache
// may only make it faster. pgstore imports nothing else of queengate, and it
// is the only package that imports pgx.
package pgstore
