// Package admin is queenctl's side of the gateway's admin API
// (docs/admin-api.md): each operation in both of its spellings (an HTTP
// method and path, a NATS subject, one JSON body), the two transports
// that send them (HTTPClient, and NATSClient over a connection the
// caller made), lists read whole by following their pages, and what an
// answer that is not a success turns into: the gateway's error
// (GatewayError), no answer at all (UnreachableError), or NATS refusing
// a subject (RefusedError). Of this module it speaks only the wire
// contract (package queengate) and queenctl's option and output helpers.
package admin
