package main

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	queengate "github.com/queengate/queengate"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// operation is one admin request of docs/admin-api.md, in both of its
// spellings: the gateway serves the same body and answer on HTTP and NATS.
type operation struct {
	method, path string                          // HTTP
	subject      func(queengate.Subjects) string // NATS
	body         []byte                          // JSON, or nil; over HTTP a GET sends none
}

func opConfigure(req queengate.ConfigureRequest) operation {
	body, _ := json.Marshal(req) // plain strings and integers: cannot fail
	return operation{method: http.MethodPost, path: "/configure", subject: queengate.Subjects.Configure, body: body}
}

// opListQueues lists the queues from the one named from on ("": the
// first): a page of the list (docs/admin-api.md).
func opListQueues(from string) operation {
	path, body := page(from)
	return operation{method: http.MethodGet, path: "/queues" + path, subject: queengate.Subjects.QueuesList, body: body}
}

// opGetQueue gets a queue with its partitions from the one named from on
// ("": the first).
func opGetQueue(queue, from string) operation {
	path, body := page(from)
	return operation{method: http.MethodGet, path: "/queues/" + url.PathEscape(queue) + path,
		subject: func(s queengate.Subjects) string { return s.QueuesGet(queue) }, body: body}
}

// page is a paged list's position from as an HTTP query and a NATS body
// (none for the first page).
func page(from string) (query string, body []byte) {
	if from == "" {
		return "", nil
	}
	body, _ = json.Marshal(queengate.QueuesRequest{From: from}) // a string: cannot fail
	return "?" + url.Values{"from": {from}}.Encode(), body
}

// opGroups lists a queue's consumer groups (group ""), or pages one group's
// partitions from the one named from on: the consumer-facing request, so
// that a consumer allowed only its own queue's subjects can run it.
func opGroups(queue, group, from string) operation {
	path := "/queues/" + url.PathEscape(queue) + "/groups"
	var body []byte
	if group != "" {
		q := url.Values{"group": {group}}
		if from != "" {
			q.Set("from", from)
		}
		path += "?" + q.Encode()
		body, _ = json.Marshal(queengate.GroupsRequest{Group: group, From: from}) // strings: cannot fail
	}
	return operation{method: http.MethodGet, path: path,
		subject: func(s queengate.Subjects) string { return s.Groups(queue) }, body: body}
}

func opStatus() operation {
	return operation{method: http.MethodGet, path: "/status", subject: queengate.Subjects.Status}
}

// opListTimers lists pending timers: queue "" for every queue, limit 0
// for the gateway's default, from the position from on (nil: the first
// due). Over HTTP the query carries what the NATS body does.
func opListTimers(queue string, limit int, from *queengate.TimerPosition) operation {
	q := url.Values{}
	req := map[string]any{}
	if queue != "" {
		q.Set("queue", queue)
		req["queue"] = queue
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
		req["limit"] = limit
	}
	if from != nil {
		q.Set("fromFireAt", from.FireAt.Format(time.RFC3339Nano))
		q.Set("fromTimerId", from.TimerID)
		req["from"] = from
	}
	path := "/timers"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	body, _ := json.Marshal(req) // a string and an integer: cannot fail
	return operation{method: http.MethodGet, path: path, subject: queengate.Subjects.TimerList, body: body}
}

// adminClient sends admin operations to a gateway. Implementations return
// the gateway's JSON answer on success; otherwise a *gatewayError (it
// answered an error) or an *unreachableError (nothing answered).
type adminClient interface {
	do(ctx context.Context, op operation) ([]byte, error)
}

// httpClient talks to a gateway's admin HTTP address.
type httpClient struct {
	base    string // e.g. http://127.0.0.1:6632, no trailing slash
	token   string
	timeout time.Duration
	hc      *http.Client
}

func newHTTPClient(base, token string, timeout time.Duration) *httpClient {
	return &httpClient{base: base, token: token, timeout: timeout, hc: &http.Client{}}
}

func (c *httpClient) do(ctx context.Context, op operation) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	// A GET carries no body: its query says what the NATS body does.
	var body io.Reader
	if op.body != nil && op.method != http.MethodGet {
		body = bytes.NewReader(op.body)
	}
	req, err := http.NewRequestWithContext(ctx, op.method, c.base+op.path, body)
	if err != nil {
		return nil, usagef("--http %q: %v", c.base, err)
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
			return nil, &unreachableError{fmt.Sprintf("no answer from %s within %v: is the gateway overloaded? (raise --timeout)", c.base, c.timeout)}
		}
		if ctx.Err() != nil {
			return nil, ctx.Err() // interrupted
		}
		return nil, &unreachableError{fmt.Sprintf("could not reach the gateway at %s: %v; is queengate running there? (set --http or QUEENCTL_HTTP_URL)", c.base, unwrapURLError(err))}
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, &unreachableError{fmt.Sprintf("reading the answer of %s %s: %v", op.method, c.base+op.path, err)}
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return answer, nil
	}
	ge := answerError(resp.StatusCode, "", answer, c.token != "")
	if !isErrorBody(answer) && (resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed) {
		// Not the protocol's error body: the route itself is missing.
		path, _, _ := strings.Cut(op.path, "?")
		ge.hint = fmt.Sprintf("%s does not serve %s %s: is it a queengate recent enough for queenctl?", c.base, op.method, path)
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
func answerError(code int, fallback string, body []byte, tokenSet bool) *gatewayError {
	ge := &gatewayError{Code: code}
	var eb queengate.ErrorBody
	switch {
	case json.Unmarshal(body, &eb) == nil && eb.Error.Message != "":
		ge.Message = eb.Error.Message
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
			ge.hint = "unauthorized: the gateway refused the admin token: check --token or QUEEN_ADMIN_TOKEN"
		} else {
			ge.hint = "unauthorized: set --token or QUEEN_ADMIN_TOKEN"
		}
	}
	return ge
}

// natsClient talks to gateways over NATS request-reply.
type natsClient struct {
	nc       *nats.Conn
	subjects queengate.Subjects
	token    string
	timeout  time.Duration
}

// dialNATS connects with the same credential options as the daemon; a
// permissions violation on the connection is given to refuse.
func dialNATS(ctx context.Context, g *globals, refuse context.CancelCauseFunc) (*natsClient, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// A missing file is the operator's to fix, not an unreachable server.
	for _, f := range []struct{ flag, path string }{{"--nats-creds", g.natsCreds}, {"--nats-nkey", g.natsNKey}, {"--nats-tls-ca", g.natsTLSCA}} {
		if f.path == "" {
			continue
		}
		if _, err := os.Stat(f.path); err != nil {
			return nil, usagef("%s: %v", f.flag, err)
		}
	}
	opts := []nats.Option{
		nats.Name("queenctl"),
		nats.Timeout(g.timeout),
		// One short command: a broken connection is reported, not retried.
		nats.NoReconnect(),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if errors.Is(err, nats.ErrPermissionViolation) && refuse != nil {
				refuse(refusal(err))
			}
		}),
	}
	auth := queengate.NATSAuth{User: g.natsUser, Password: g.natsPassword, Token: g.natsToken,
		CredsFile: g.natsCreds, NKeyFile: g.natsNKey, TLSCA: g.natsTLSCA}
	authOpts, err := auth.Options()
	if err != nil {
		return nil, usagef("--nats-nkey %s: %v", g.natsNKey, err)
	}
	opts = append(opts, authOpts...)
	nc, err := nats.Connect(g.natsURL, opts...)
	if err != nil {
		if errors.Is(err, nats.ErrAuthorization) || strings.Contains(strings.ToLower(err.Error()), "authorization") {
			return nil, &unreachableError{fmt.Sprintf("NATS at %s refused the connection: %v; check --nats-user/--nats-password, --nats-token, --nats-creds or --nats-nkey", g.natsURL, err)}
		}
		var uae x509.UnknownAuthorityError
		if errors.As(err, &uae) || strings.Contains(err.Error(), "x509:") {
			return nil, &unreachableError{fmt.Sprintf("NATS at %s: its TLS certificate is not trusted (%v): set --nats-tls-ca or QUEEN_NATS_TLS_CA to the CA that signed it", g.natsURL, err)}
		}
		return nil, &unreachableError{fmt.Sprintf("could not reach NATS at %s: %v; is it running? (set --nats or QUEENCTL_NATS_URL)", g.natsURL, err)}
	}
	return &natsClient{nc: nc, subjects: queengate.Subjects{Prefix: g.prefix}, token: g.token, timeout: g.timeout}, nil
}

func (c *natsClient) close() { c.nc.Close() }

func (c *natsClient) do(ctx context.Context, op operation) ([]byte, error) {
	return c.request(ctx, op.subject(c.subjects), op.body)
}

// maxPayload is the largest request the NATS server accepts.
func (c *natsClient) maxPayload() int { return int(c.nc.MaxPayload()) }

// request sends body to subject with the admin token header and returns
// the answer, or the gateway's micro-convention error.
func (c *natsClient) request(ctx context.Context, subject string, body []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	msg := nats.NewMsg(subject)
	msg.Data = body
	if c.token != "" {
		// The same header as on HTTP, carried as a NATS header.
		msg.Header.Set(queengate.HeaderAuthorization, "Bearer "+c.token)
	}
	reply, err := c.nc.RequestMsgWithContext(ctx, msg)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return nil, &unreachableError{fmt.Sprintf("no gateway answers on %s: is queengate running on this NATS, with subject prefix %q? (--prefix, QUEEN_SUBJECT_PREFIX)", subject, c.subjects.Prefix)}
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout):
		return nil, &unreachableError{fmt.Sprintf("no answer on %s within %v: is the gateway overloaded? (raise --timeout)", subject, c.timeout)}
	case err != nil && ctx.Err() != nil:
		return nil, ctx.Err()
	case err != nil:
		return nil, &unreachableError{fmt.Sprintf("request on %s: %v", subject, err)}
	}
	if code := reply.Header.Get(queengate.HeaderErrorCode); code != "" {
		n, _ := strconv.Atoi(code)
		return nil, answerError(n, reply.Header.Get(queengate.HeaderError), reply.Data, c.token != "")
	}
	return reply.Data, nil
}

func partitionPath(queue, partition string) string {
	return "/queues/" + url.PathEscape(queue) + "/partitions/" + url.PathEscape(partition)
}

// opRead reads a partition from an offset.
func opRead(queue, partition string, req queengate.ReadRequest) operation {
	q := url.Values{"from": {strconv.FormatInt(req.From, 10)}}
	if req.Max > 0 {
		q.Set("max", strconv.Itoa(req.Max))
	}
	if req.MaxBytes > 0 {
		q.Set("maxBytes", strconv.FormatInt(req.MaxBytes, 10))
	}
	body, _ := json.Marshal(req) // integers: cannot fail
	return operation{method: http.MethodGet, path: partitionPath(queue, partition) + "/messages?" + q.Encode(),
		subject: func(s queengate.Subjects) string { return s.Read(queue, partition) }, body: body}
}

// opGetMessage fetches one message by its id.
func opGetMessage(id string) operation {
	body, _ := json.Marshal(queengate.GetRequest{MessageID: id})
	return operation{method: http.MethodGet, path: "/messages/" + url.PathEscape(id), subject: queengate.Subjects.MessageGet, body: body}
}

// opGetTransaction fetches the message a transactionId names.
func opGetTransaction(queue, partition, txnID string) operation {
	body, _ := json.Marshal(queengate.GetRequest{Queue: queue, Partition: partition, TransactionID: txnID})
	return operation{method: http.MethodGet, path: partitionPath(queue, partition) + "/transactions/" + url.PathEscape(txnID),
		subject: queengate.Subjects.MessageGet, body: body}
}

// opExplain explains a transactionId's verdict.
func opExplain(queue, partition, txnID string) operation {
	body, _ := json.Marshal(queengate.ExplainRequest{TransactionID: txnID})
	return operation{method: http.MethodGet, path: partitionPath(queue, partition) + "/explain?" + url.Values{"transactionId": {txnID}}.Encode(),
		subject: func(s queengate.Subjects) string { return s.Explain(queue, partition) }, body: body}
}
