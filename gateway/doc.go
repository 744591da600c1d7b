// Package gateway is queengate's NATS face: it serves the push subjects of
// docs/protocol.md as a nats.go micro service (queue group "queengate"),
// decodes and validates requests (in internal/wire's terms), hands them to
// ingest, and answers each message on the reply subject or, for
// fire-and-forget publishes, on the ack subject. The other request-reply
// faces register on its endpoint machinery (Config.Endpoints: EndpointSet,
// Endpoint, Request), which subscribes, counts requests in flight and
// answers. It also serves timers and the operator API
// (docs/admin-api.md), runs the admin HTTP server (/metrics, /healthz,
// /readyz) and, when no NATS URL is configured, an embedded nats-server.
package gateway
