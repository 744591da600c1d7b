// Package groups is the consumer groups' storage: groups and their
// cursors, pops with leases, acks (and ack-and-push), lease renewal and
// release, dead letters and their redrive, group creation at a position,
// seeks, activity and deletion. Its Store shares pgstore.Store's pool,
// which embeds it, so that one *pgstore.Store serves the whole store;
// what the two share of the SQL wire (binary arrays, the push statement)
// is in pgstore/internal/pgwire.
package groups
