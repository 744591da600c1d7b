package admin

import (
	"fmt"
	"strings"

	"github.com/queengate/queengate/internal/ctl/output"
)

// UnreachableError means no gateway answered at all.
type UnreachableError struct{ Msg string }

func (e *UnreachableError) Error() string { return e.Msg }

// AddressError is an HTTP address no request can be made to; nothing was
// sent.
type AddressError struct{ Msg string }

func (e *AddressError) Error() string { return e.Msg }

// GatewayError is an error the gateway answered (docs/protocol.md's error
// body).
type GatewayError struct {
	Code    int
	Message string
	Hint    string // what the operator should do, when we know
}

func (e *GatewayError) Error() string {
	s := fmt.Sprintf("gateway answered %d: %s", e.Code, output.Printable(e.Message))
	if e.Hint != "" {
		s = e.Hint + " (" + s + ")"
	}
	return s
}

// RefusedError is a permissions violation NATS reported for this
// connection: the request it refused is never answered.
type RefusedError struct{ violation string }

func (e *RefusedError) Error() string {
	return "NATS refused: " + e.violation + "; the NATS user lacks this permission (see docs/security.md)"
}

// Refusal turns nats.go's permissions violation error into what the user
// is told: `permissions violation for publish to "<subject>"`.
func Refusal(err error) *RefusedError {
	msg := err.Error()
	if i := strings.Index(strings.ToLower(msg), "permissions violation for "); i >= 0 {
		msg = "permissions violation for " + strings.ToLower(msg[i+26:i+27]) + msg[i+27:]
	}
	return &RefusedError{violation: msg}
}
