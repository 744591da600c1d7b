// Package server runs a whole queengate gateway in-process: the store
// opened and migrated, ingest, timers, retention, the NATS gateway, the
// admin HTTP server, and an embedded nats-server when no NATS URL is
// given. cmd/queengate is its command-line face; queengatetest runs one
// per test. Start waits for PostgreSQL and NATS as the daemon does, and
// Stop refuses new requests, answers everything accepted, then closes.
package server
