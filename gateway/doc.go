// Package gateway is queengate's NATS face: it serves the push subjects of
// docs/protocol.md as a nats.go micro service (queue group "queengate"),
// decodes and validates requests (in internal/wire's terms), hands them to
// ingest, and answers each message on the reply subject or, for
// fire-and-forget publishes, on the ack subject; with routing it starts
// and stops the router. The other request-reply faces (packages consume
// and operator) register on its endpoint machinery (Config.Endpoints:
// EndpointSet, Endpoint, Request), which subscribes, authorizes, counts
// requests in flight and answers; an Endpoint also carries its admin HTTP
// routes (HTTPForm), which the operator package's admin server mounts
// from the same entries (Table).
package gateway
