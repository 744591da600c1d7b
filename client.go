package queengate

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// Client talks to queengate gateways over a NATS connection it does not
// own. It is safe for concurrent use.
type Client struct {
	nc       *nats.Conn
	subjects Subjects
	token    string
	timeout  time.Duration

	mu   sync.Mutex
	acks map[string]*ackListener // by ack subject
}

// Option configures a Client.
type Option func(*Client)

// WithPrefix sets the subject prefix the gateways use (default "queen").
func WithPrefix(prefix string) Option { return func(c *Client) { c.subjects.Prefix = prefix } }

// WithAdminToken sends the admin token with operator requests (configure,
// queue reads, status, timer list), for gateways that require one.
func WithAdminToken(token string) Option { return func(c *Client) { c.token = token } }

// WithTimeout bounds a request whose context has no deadline (default
// 10 s).
func WithTimeout(d time.Duration) Option { return func(c *Client) { c.timeout = d } }

// NewClient makes a client on nc.
func NewClient(nc *nats.Conn, opts ...Option) (*Client, error) {
	c := &Client{nc: nc, subjects: Subjects{Prefix: DefaultPrefix}, timeout: 10 * time.Second,
		acks: map[string]*ackListener{}}
	for _, o := range opts {
		o(c)
	}
	if err := ValidPrefix(c.subjects.Prefix); err != nil {
		return nil, err
	}
	if c.timeout <= 0 {
		return nil, errors.New("queengate: the timeout must be positive")
	}
	return c, nil
}

// Subjects are the subjects this client uses.
func (c *Client) Subjects() Subjects { return c.subjects }

// Timeout is what bounds a request whose context has no deadline
// (WithTimeout): a consumer bounds each pop by it and the pop's wait.
func (c *Client) Timeout() time.Duration { return c.timeout }

// Close stops reading ack subjects; pending fire-and-forget pushes are
// then answered with ErrClosed.
func (c *Client) Close() {
	c.mu.Lock()
	acks := c.acks
	c.acks = map[string]*ackListener{}
	c.mu.Unlock()
	for _, l := range acks {
		l.close()
	}
}

// ErrClosed is what a pending fire-and-forget push answers after Close.
var ErrClosed = errors.New("queengate: client closed")

// Push sends msgs to a partition ("" is the Default partition, by the
// short subject) and waits for their answers, one per message in order.
// An error is either an *Error (the request was rejected as a whole;
// nothing was stored) or a transport error such as nats.ErrNoResponders
// or a timeout, after which the outcome is unknown: retry with the same
// transactionIds, and what was stored answers duplicate.
func (c *Client) Push(ctx context.Context, queue, partition string, msgs ...Message) ([]Result, error) {
	body, err := pushBody(queue, partition, msgs, false)
	if err != nil {
		return nil, err
	}
	var answers []Result
	if err := c.request(ctx, c.subjects.Push(queue, partition), body, false, &answers); err != nil {
		return nil, err
	}
	if len(answers) != len(msgs) {
		return nil, fmt.Errorf("queengate: %d answers for %d messages", len(answers), len(msgs))
	}
	return answers, nil
}

// Retryable reports whether a failed message may still be stored by a
// retry with the same transactionId and data: every failure but a payload
// conflict, which a retry meets again (docs/protocol.md, "Payload
// conflicts").
func (a Result) Retryable() bool { return a.Status == StatusFailed && !a.Conflict }

// pushBody validates a push and encodes its body. named requires a
// transactionId on every message (fire-and-forget answers are matched to
// their request by them).
func pushBody(queue, partition string, msgs []Message, named bool) ([]byte, error) {
	if err := CheckName("queue", queue); err != nil {
		return nil, err
	}
	if partition != "" {
		if err := CheckName("partition", partition); err != nil {
			return nil, err
		}
	}
	if len(msgs) == 0 {
		return nil, errors.New("queengate: a push needs at least one message")
	}
	for i, m := range msgs {
		if len(m.TransactionID) > MaxTxnIDBytes {
			return nil, fmt.Errorf("queengate: message %d: transactionId over %d bytes", i, MaxTxnIDBytes)
		}
		if named && m.TransactionID == "" {
			return nil, fmt.Errorf("queengate: message %d: a fire-and-forget push needs a transactionId on every message", i)
		}
	}
	body := []byte{'['}
	for i, m := range msgs {
		if i > 0 {
			body = append(body, ',')
		}
		var err error
		if body, err = m.AppendJSON(body); err != nil {
			return nil, fmt.Errorf("queengate: message %d: %w", i, err)
		}
	}
	return append(body, ']'), nil
}

// AppendJSON appends m as a message object of a push body, its data byte
// for byte as given. encoding/json would compact the data and escape <, >
// and &: on a queue whose onConflict is reject, a retry of data first
// pushed by other means would then answer a payload conflict.
func (m Message) AppendJSON(b []byte) ([]byte, error) {
	head := struct {
		TransactionID string  `json:"transactionId,omitempty"`
		Headers       Headers `json:"headers,omitempty"`
		DataEncoding  string  `json:"dataEncoding,omitempty"`
	}{TransactionID: m.TransactionID, Headers: m.Headers}
	data := m.Data
	if m.Binary != nil {
		if len(m.Data) > 0 {
			return nil, errors.New("give Data (JSON) or Binary (bytes), not both")
		}
		data = json.RawMessage(`"` + base64.StdEncoding.EncodeToString(m.Binary) + `"`)
		head.DataEncoding = DataEncodingBase64
	}
	obj, err := json.Marshal(head)
	if err != nil {
		return nil, err
	}
	return withData(b, obj, data)
}

// withData appends the JSON object obj to b with data, byte for byte, as
// its "data" field; no field when data is empty.
func withData(b, obj []byte, data json.RawMessage) ([]byte, error) {
	if len(data) == 0 {
		return append(b, obj...), nil
	}
	if !json.Valid(data) {
		return nil, errors.New("data is not valid JSON")
	}
	b = append(b, obj[:len(obj)-1]...) // without its }
	if len(obj) > 2 {
		b = append(b, ',')
	}
	b = append(b, `"data":`...)
	b = append(b, data...)
	return append(b, '}'), nil
}

// request sends body to subject and decodes the answer into v; an error
// reply becomes an *Error.
func (c *Client) request(ctx context.Context, subject string, body []byte, operator bool, v any) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	msg := nats.NewMsg(subject)
	msg.Data = body
	if operator && c.token != "" {
		msg.Header.Set(HeaderAuthorization, "Bearer "+c.token)
	}
	reply, err := c.nc.RequestMsgWithContext(ctx, msg)
	if err != nil {
		return fmt.Errorf("queengate: %s: %w", subject, err)
	}
	if werr := replyError(reply); werr != nil {
		return werr
	}
	if d, ok := v.(handDecoded); ok && d.decodeByHand(reply.Data) {
		return nil
	}
	if err := json.Unmarshal(reply.Data, v); err != nil {
		return fmt.Errorf("queengate: %s: unreadable answer %q: %w", subject, reply.Data, err)
	}
	return nil
}

// handDecoded is an answer with a decoder of its own, faster than
// json.Unmarshal, for the shape the gateway writes (answerwire.go): it
// reports whether it took body, and declines anything else.
type handDecoded interface{ decodeByHand(body []byte) bool }

// groupRequest sends req (nil: no body) to subject, a request about
// queue's group, once both names are valid, and decodes the answer into
// out.
func (c *Client) groupRequest(ctx context.Context, queue, group, subject string, req any, operator bool, out any) error {
	if !ValidName(queue) || !ValidName(group) {
		return fmt.Errorf("queengate: bad queue or group name %q/%q: %s", queue, group, NameRule)
	}
	var body []byte
	if req != nil {
		var err error
		if body, err = json.Marshal(req); err != nil {
			return err
		}
	}
	return c.request(ctx, subject, body, operator, out)
}

// replyError is the *Error a reply carries, if any.
func replyError(m *nats.Msg) *Error {
	code := m.Header.Get(HeaderErrorCode)
	if code == "" {
		return nil
	}
	var eb ErrorBody
	if json.Unmarshal(m.Data, &eb) == nil && eb.Error.Code != 0 {
		return &eb.Error
	}
	n, _ := strconv.Atoi(code)
	return &Error{Code: n, Text: m.Header.Get(HeaderError)}
}

// Pending is a fire-and-forget push waiting for its answers.
type Pending struct {
	answers chan []Result
	closed  <-chan struct{}
}

// Wait returns the push's answers once they are published on the ack
// subject. A push rejected as a whole is answered on the ack subject
// without transactionIds, so it cannot be matched: Wait then ends with
// ctx. Publish validates what it can first, so that rarely happens.
func (p *Pending) Wait(ctx context.Context) ([]Result, error) {
	select {
	case a := <-p.answers:
		return a, nil
	case <-p.closed:
		return nil, ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Publish sends msgs to a partition without a reply subject: the gateway
// answers on the partition's ack subject, which the client reads and
// matches to this push by its transactionIds (so every message needs
// one). Requests with the same transactionIds in the same order are
// answered oldest first.
func (c *Client) Publish(ctx context.Context, queue, partition string, msgs ...Message) (*Pending, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	body, err := pushBody(queue, partition, msgs, true)
	if err != nil {
		return nil, err
	}
	ackPartition := partition
	if ackPartition == "" {
		ackPartition = DefaultPartition
	}
	l, err := c.ackListener(c.subjects.PushAnswer(queue, ackPartition))
	if err != nil {
		return nil, err
	}
	p := l.expect(ackKey(msgs))
	if err := c.nc.Publish(c.subjects.Push(queue, partition), body); err != nil {
		l.forget(ackKey(msgs), p)
		return nil, fmt.Errorf("queengate: publish: %w", err)
	}
	return p, nil
}

// ackKey identifies a push's answers: its transactionIds, in order.
func ackKey(msgs []Message) string {
	return idsKey(msgs, func(m Message) string { return m.TransactionID })
}

func answersKey(answers []Result) string {
	return idsKey(answers, func(a Result) string { return a.TransactionID })
}

func idsKey[T any](xs []T, id func(T) string) string {
	var b strings.Builder
	for _, x := range xs {
		b.WriteString(id(x))
		b.WriteByte(0)
	}
	return b.String()
}

// ackListener reads one ack subject and hands answers to the pushes
// waiting for them.
type ackListener struct {
	sub     *nats.Subscription
	mu      sync.Mutex
	waiting map[string][]*Pending
	closed  chan struct{}
}

// ackListener returns the listener of subject, subscribing (and waiting
// until the server has the subscription, so no answer is missed) on first
// use.
func (c *Client) ackListener(subject string) (*ackListener, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if l := c.acks[subject]; l != nil {
		return l, nil
	}
	l := &ackListener{waiting: map[string][]*Pending{}, closed: make(chan struct{})}
	sub, err := c.nc.Subscribe(subject, l.deliver)
	if err != nil {
		return nil, fmt.Errorf("queengate: subscribe %s: %w", subject, err)
	}
	if err := c.nc.Flush(); err != nil {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("queengate: subscribe %s: %w", subject, err)
	}
	l.sub = sub
	c.acks[subject] = l
	return l, nil
}

func (l *ackListener) expect(key string) *Pending {
	p := &Pending{answers: make(chan []Result, 1), closed: l.closed}
	l.mu.Lock()
	l.waiting[key] = append(l.waiting[key], p)
	l.mu.Unlock()
	return p
}

func (l *ackListener) forget(key string, p *Pending) {
	l.mu.Lock()
	defer l.mu.Unlock()
	q := l.waiting[key]
	for i, x := range q {
		if x == p {
			l.waiting[key] = append(q[:i:i], q[i+1:]...)
			break
		}
	}
	if len(l.waiting[key]) == 0 {
		delete(l.waiting, key)
	}
}

func (l *ackListener) deliver(m *nats.Msg) {
	var answers []Result
	if json.Unmarshal(m.Data, &answers) != nil || len(answers) == 0 {
		return // a rejection as a whole names no transactionIds
	}
	key := answersKey(answers)
	l.mu.Lock()
	q := l.waiting[key]
	var p *Pending
	if len(q) > 0 {
		p = q[0]
		if len(q) == 1 {
			delete(l.waiting, key)
		} else {
			l.waiting[key] = q[1:]
		}
	}
	l.mu.Unlock()
	if p != nil {
		p.answers <- answers
	}
}

func (l *ackListener) close() {
	_ = l.sub.Unsubscribe()
	close(l.closed)
}

// Timer is a timer to schedule: its message, and when it fires — FireAt,
// or Delay from when the gateway reads the request (exactly one).
type Timer struct {
	TransactionID string
	Data          json.RawMessage
	FireAt        time.Time
	Delay         time.Duration
}

// ScheduleTimer schedules a timer whose fire pushes its message to the
// partition, exactly once.
func (c *Client) ScheduleTimer(ctx context.Context, queue, partition string, t Timer) (TimerScheduled, error) {
	var out TimerScheduled
	if err := checkPlace(queue, partition); err != nil {
		return out, err
	}
	if !t.FireAt.IsZero() && t.Delay != 0 {
		return out, errors.New("queengate: a timer has FireAt or Delay, not both")
	}
	req := TimerRequest{TransactionID: t.TransactionID, Data: t.Data}
	if !t.FireAt.IsZero() {
		req.FireAt = t.FireAt.Format(time.RFC3339Nano)
	} else {
		ms := t.Delay.Milliseconds()
		req.DelayMs = &ms
	}
	body, err := req.AppendJSON(nil)
	if err != nil {
		return out, fmt.Errorf("queengate: the timer's %w", err)
	}
	return out, c.request(ctx, c.subjects.Timer(queue, partition), body, false, &out)
}

// AppendJSON appends r as a timer request body, its data byte for byte as
// given (see [Message.AppendJSON]).
func (r TimerRequest) AppendJSON(b []byte) ([]byte, error) {
	data := r.Data
	r.Data = nil
	head, _ := json.Marshal(r) // strings and an integer: cannot fail
	return withData(b, head, data)
}

// CancelTimer cancels a pending timer: "cancelled", or "absent" when it
// is no longer pending (fired, cancelled, or never existed).
func (c *Client) CancelTimer(ctx context.Context, timerID string) (TimerCancelled, error) {
	var out TimerCancelled
	b, _ := json.Marshal(map[string]string{"timerId": timerID}) // a string: cannot fail
	return out, c.request(ctx, c.subjects.TimerCancel(), b, false, &out)
}

// ListTimers lists pending timers, due first: of one queue, or every
// queue's with queue ""; limit 0 takes the gateway's default. An answer
// whose Next is set has more after it: ListTimersPage lists them.
func (c *Client) ListTimers(ctx context.Context, queue string, limit int) (TimersAnswer, error) {
	return c.ListTimersPage(ctx, TimerListRequest{Queue: queue, Limit: limit})
}

// ListTimersPage lists pending timers as req asks: from req.From on (the
// Next of the page before), so that paging skips and repeats none.
func (c *Client) ListTimersPage(ctx context.Context, req TimerListRequest) (TimersAnswer, error) {
	var out TimersAnswer
	b, _ := json.Marshal(req) // strings, an integer and a time: cannot fail
	return out, c.request(ctx, c.subjects.TimerList(), b, true, &out)
}

// Configure creates or changes a queue.
func (c *Client) Configure(ctx context.Context, req ConfigureRequest) (ConfigureAnswer, error) {
	var out ConfigureAnswer
	b, err := json.Marshal(req)
	if err != nil {
		return out, fmt.Errorf("queengate: encode the configure: %w", err)
	}
	return out, c.request(ctx, c.subjects.Configure(), b, true, &out)
}

// Queues lists the queues' configurations in name order, as many as fit
// one answer: when Truncated, QueuesPage lists the rest from NextQueue.
func (c *Client) Queues(ctx context.Context) (QueuesAnswer, error) {
	return c.QueuesPage(ctx, QueuesRequest{})
}

// QueuesPage lists the queues from req.From on (the NextQueue of the page
// before; "": from the first).
func (c *Client) QueuesPage(ctx context.Context, req QueuesRequest) (QueuesAnswer, error) {
	var out QueuesAnswer
	return out, c.request(ctx, c.subjects.QueuesList(), pageBody(req.From), true, &out)
}

// Queue reads a queue's configuration and per-partition figures, as many
// partitions as fit one answer: when NextPartition is set, QueuePage
// lists the rest from it.
func (c *Client) Queue(ctx context.Context, queue string) (QueueAnswer, error) {
	return c.QueuePage(ctx, queue, QueueRequest{})
}

// QueuePage reads a queue with its partitions from req.From on (the
// NextPartition of the page before; "": from the first).
func (c *Client) QueuePage(ctx context.Context, queue string, req QueueRequest) (QueueAnswer, error) {
	var out QueueAnswer
	if err := CheckName("queue", queue); err != nil {
		return out, err
	}
	return out, c.request(ctx, c.subjects.QueuesGet(queue), pageBody(req.From), true, &out)
}

// pageBody is a paged list's body: none for the first page.
func pageBody(from string) []byte {
	if from == "" {
		return nil
	}
	b, _ := json.Marshal(QueuesRequest{From: from}) // a string: cannot fail
	return b
}

// Overview reads every queue at a glance, as many as fit one answer, from
// the queue from on ("": the first); when Truncated, read again from
// NextQueue.
func (c *Client) Overview(ctx context.Context, from string) (OverviewAnswer, error) {
	var out OverviewAnswer
	return out, c.request(ctx, c.subjects.Overview(), pageBody(from), true, &out)
}

// Status reads the health and figures of the gateway that answers.
func (c *Client) Status(ctx context.Context) (StatusAnswer, error) {
	var out StatusAnswer
	return out, c.request(ctx, c.subjects.Status(), nil, true, &out)
}

// Read reads a partition's messages in offset order from req.From. Read
// again from the answer's Next to go on; at the end Messages is empty.
func (c *Client) Read(ctx context.Context, queue, partition string, req ReadRequest) (ReadAnswer, error) {
	var out ReadAnswer
	if err := checkPlace(queue, partition); err != nil {
		return out, err
	}
	b, _ := json.Marshal(req) // integers: cannot fail
	return out, c.request(ctx, c.subjects.Read(queue, partition), b, true, &out)
}

// GetMessage fetches one message by its messageId.
func (c *Client) GetMessage(ctx context.Context, messageID string) (MessageAnswer, error) {
	return c.get(ctx, GetRequest{MessageID: messageID})
}

// GetTransaction fetches the message a transactionId names in a
// partition: the copy a duplicate would name (within the window).
func (c *Client) GetTransaction(ctx context.Context, queue, partition, transactionID string) (MessageAnswer, error) {
	return c.get(ctx, GetRequest{Queue: queue, Partition: partition, TransactionID: transactionID})
}

func (c *Client) get(ctx context.Context, req GetRequest) (MessageAnswer, error) {
	var out MessageAnswer
	b, _ := json.Marshal(req) // strings: cannot fail
	return out, c.request(ctx, c.subjects.MessageGet(), b, true, &out)
}

// Explain says what a push of transactionID to the partition would be
// answered now, and why.
func (c *Client) Explain(ctx context.Context, queue, partition, transactionID string) (ExplainAnswer, error) {
	var out ExplainAnswer
	if err := checkPlace(queue, partition); err != nil {
		return out, err
	}
	b, _ := json.Marshal(ExplainRequest{TransactionID: transactionID})
	return out, c.request(ctx, c.subjects.Explain(queue, partition), b, true, &out)
}
