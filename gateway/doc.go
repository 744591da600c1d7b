// Package gateway is queengate's NATS face: it serves the push subjects of
// docs/protocol.md as a nats.go micro service (queue group "queengate"),
// decodes and validates requests, hands them to ingest, and answers each
// message on the reply subject or, for fire-and-forget publishes, on the
// ack subject. It also serves timers and the operator API
// (docs/admin-api.md), runs the admin HTTP server (/metrics, /healthz,
// /readyz) and, when no NATS URL is configured, an embedded nats-server.
package gateway
