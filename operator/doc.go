// Package operator owns the operator API of docs/admin-api.md as one
// table of entries (Ops.Operations), each served on its NATS subject by
// the gateway and, when it has one, on its admin HTTP route by Admin:
// configure, queues, status, overview, reads, explain, message get, dead
// letters; the fitting of those answers to the
// max payload; and the admin HTTP server itself (/metrics, /healthz,
// /readyz, profiles, the status page), which mounts the HTTP forms of
// every table it is given (the timer list of package timers, the groups
// of package consume), with the admin token, body bound and JSON
// errors alike.
package operator
