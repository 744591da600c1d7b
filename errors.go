package queengate

import "fmt"

// Error codes of a request rejected as a whole (docs/protocol.md): the
// one table.
const (
	CodeBadRequest       = 400 // bad input; the message says what to fix, nothing was stored
	CodeUnauthorized     = 401 // the operator API's admin token is missing or wrong
	CodeNotFound         = 404 // no such queue, or path
	CodeMethodNotAllowed = 405 // the admin HTTP path exists with another method
	CodeConflict         = 409 // a consumer's lease is not (or no longer) the partition's
	CodeTooLarge         = 413 // too many messages, or too many bytes, in one request
	CodeInternal         = 500 // a fault of the gateway's; retry with the same transactionIds
	CodeUnavailable      = 503 // overloaded, stopping, or PostgreSQL away; retry with the same transactionIds
)

// Headers of an error reply, as NATS micro services write them.
const (
	HeaderError     = "Nats-Service-Error"
	HeaderErrorCode = "Nats-Service-Error-Code"
	// HeaderAuthorization carries the admin token on the operator
	// subjects: "Bearer <token>".
	HeaderAuthorization = "Authorization"
)

// Error is a request rejected as a whole; nothing of it was stored.
type Error struct {
	Code int `json:"code"`
	// Text says what to fix or why; the wire calls it "message".
	Text string `json:"message"`
}

func (e *Error) Error() string { return fmt.Sprintf("%d %s", e.Code, e.Text) }

// Retryable reports whether the same request may succeed later (503): a
// retry must carry the same transactionIds.
func (e *Error) Retryable() bool { return e.Code == CodeUnavailable }

// ErrorBody is the JSON body of an error reply.
type ErrorBody struct {
	Error Error `json:"error"`
}
