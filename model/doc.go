// Package model is what the store and its callers say to each other: a
// push's frames and results, partitions and hydrations, queue
// configuration, timers and retention, and the hash identity of a
// transactionId. It imports no database driver, so ingest, timers, the
// gateway and the retention runner never link pgx: pgstore implements
// their store interfaces in these terms.
package model
