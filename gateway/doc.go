// Package gateway is queengate's NATS face: it serves the push subjects of
// shared/spec/PROTOCOL.md as a nats.go micro service (queue group
// "queengate"), decodes and validates requests, hands them to ingest, and
// answers each message on the reply subject or, for fire-and-forget
// publishes, on the ack subject. It also runs the admin HTTP server
// (/metrics, /healthz, /readyz) and, when no NATS URL is configured, an
// embedded nats-server.
package gateway
