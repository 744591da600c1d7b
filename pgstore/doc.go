// Package pgstore owns the PostgreSQL side of queengate: the schema and its
// embedded migrations, the exact push (probe under the partition row lock,
// then allocate), bundles of pushes in one transaction, the hydration read
// for the broker cache, and queue configuration rows. Consumer groups are
// stored by package pgstore/groups, whose Store this package's embeds:
// one *Store serves both. What the two share of the SQL wire is in
// pgstore/internal/pgwire.
//
// PostgreSQL is the authority on duplicates. Every function here is exact
// on its own, whatever watermark the caller vouches for; the broker cache
// may only make it faster. pgstore imports nothing else of queengate but
// model, and it and its packages are the only library code that imports
// pgx.
package pgstore
