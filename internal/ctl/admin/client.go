package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/queengate/queengate"
)

// Client sends admin operations to a gateway. Implementations return
// the gateway's JSON answer on success; otherwise a *GatewayError (it
// answered an error) or an *UnreachableError (nothing answered).
type Client interface {
	Do(ctx context.Context, op Operation) ([]byte, error)
}

// HTTPClient talks to a gateway's admin HTTP address.
type HTTPClient struct {
	base    string // e.g. http://127.0.0.1:6632, no trailing slash
	token   string
	timeout time.Duration
	hc      *http.Client
}

func NewHTTPClient(base, token string, timeout time.Duration) *HTTPClient {
	return &HTTPClient{base: base, token: token, timeout: timeout, hc: &http.Client{}}
}

func (c *HTTPClient) Do(ctx context.Context, op Operation) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	// A GET carries no Body: its query says what the NATS body does.
	var body io.Reader
	if op.Body != nil && op.Method != http.MethodGet {
		body = bytes.NewReader(op.Body)
	}
	req, err := http.NewRequestWithContext(ctx, op.Method, c.base+op.Path, body)
	if err != nil {
		return nil, &AddressError{Msg: fmt.Sprintf("--http %q: %v", c.base, err)}
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set(queengate.HeaderAuthorization, "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		var ne net.Error
		if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
			return nil, &UnreachableError{Msg: fmt.Sprintf("no answer from %s within %v: is the gateway overloaded? (raise --timeout)", c.base, c.timeout)}
		}
		if ctx.Err() != nil {
			return nil, ctx.Err() // interrupted
		}
		return nil, &UnreachableError{Msg: fmt.Sprintf("could not reach the gateway at %s: %v; is queengate running there? (set --http or QUEENCTL_HTTP_URL)", c.base, unwrapURLError(err))}
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, &UnreachableError{Msg: fmt.Sprintf("reading the answer of %s %s: %v", op.Method, c.base+op.Path, err)}
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return answer, nil
	}
	ge := answerError(resp.StatusCode, "", answer, c.token != "")
	if !isErrorBody(answer) && (resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed) {
		// Not the protocol's error Body: the route itself is missing.
		path, _, _ := strings.Cut(op.Path, "?")
		ge.Hint = fmt.Sprintf("%s does not serve %s %s: is it a queengate recent enough for queenctl?", c.base, op.Method, path)
	}
	return nil, ge
}

// unwrapURLError drops net/http's "Get \"url\":" prefix, which repeats
// what the message already says.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

func isErrorBody(b []byte) bool {
	var eb queengate.ErrorBody
	return json.Unmarshal(b, &eb) == nil && eb.Error.Code != 0
}

// answerError builds the error for a gateway's error answer: the message
// of the JSON body, else the fallback (a NATS header), else the raw body.
// A 401 says which setting to fix.
func answerError(code int, fallback string, body []byte, tokenSet bool) *GatewayError {
	ge := &GatewayError{Code: code}
	var eb queengate.ErrorBody
	switch {
	case json.Unmarshal(body, &eb) == nil && eb.Error.Text != "":
		ge.Message = eb.Error.Text
	case fallback != "":
		ge.Message = fallback
	default:
		ge.Message = strings.TrimSpace(string(body))
		if len(ge.Message) > 200 {
			ge.Message = ge.Message[:200] + "…"
		}
		if ge.Message == "" {
			ge.Message = http.StatusText(code)
		}
	}
	if code == http.StatusUnauthorized {
		if tokenSet {
			ge.Hint = "unauthorized: the gateway refused the admin token: check --token or QUEEN_ADMIN_TOKEN"
		} else {
			ge.Hint = "unauthorized: set --token or QUEEN_ADMIN_TOKEN"
		}
	}
	return ge
}

// NATSClient talks to gateways over NATS request-reply.
type NATSClient struct {
	Conn     *nats.Conn
	Subjects queengate.Subjects
	Token    string // the admin token, sent as the HTTP header is
	Timeout  time.Duration
}

func (c *NATSClient) Close() { c.Conn.Close() }

func (c *NATSClient) Do(ctx context.Context, op Operation) ([]byte, error) {
	return c.Request(ctx, op.Subject(c.Subjects), op.Body)
}

// MaxPayload is the largest request the NATS server accepts.
func (c *NATSClient) MaxPayload() int { return int(c.Conn.MaxPayload()) }

// Request sends body to subject with the admin token header and returns
// the answer, or the gateway's micro-convention error.
func (c *NATSClient) Request(ctx context.Context, subject string, body []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	msg := nats.NewMsg(subject)
	msg.Data = body
	if c.Token != "" {
		// The same header as on HTTP, carried as a NATS header.
		msg.Header.Set(queengate.HeaderAuthorization, "Bearer "+c.Token)
	}
	reply, err := c.Conn.RequestMsgWithContext(ctx, msg)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return nil, &UnreachableError{Msg: fmt.Sprintf("no gateway answers on %s: is queengate running on this NATS, with subject prefix %q? (--prefix, QUEEN_SUBJECT_PREFIX)", subject, c.Subjects.Prefix)}
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout):
		return nil, &UnreachableError{Msg: fmt.Sprintf("no answer on %s within %v: is the gateway overloaded? (raise --timeout)", subject, c.Timeout)}
	case err != nil && ctx.Err() != nil:
		return nil, ctx.Err()
	case err != nil:
		return nil, &UnreachableError{Msg: fmt.Sprintf("request on %s: %v", subject, err)}
	}
	if code := reply.Header.Get(queengate.HeaderErrorCode); code != "" {
		n, _ := strconv.Atoi(code)
		return nil, answerError(n, reply.Header.Get(queengate.HeaderError), reply.Data, c.Token != "")
	}
	return reply.Data, nil
}
