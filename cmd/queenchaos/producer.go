package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/queengate/queengate/internal/chaos/verify"
	"github.com/queengate/queengate/internal/chaos/world"
)

// load is what the producers offer.
type load struct {
	Producers  int
	Partitions int
	Batch      int     // messages per request
	Rate       int     // messages per second offered, all producers together
	RetryShare float64 // share of messages repeating an id already answered
	// RepeatWithin bounds how old an answer a repeat may repeat: half the
	// queue's window, so that every repeat is inside it and the verifier
	// can expect each id stored once.
	RepeatWithin time.Duration
	Timeout      time.Duration
}

// event is something a producer saw, for the per-fault figures.
type event struct {
	at       time.Time
	producer int
	kind     eventKind
	n        int           // messages
	wait     time.Duration // how long the request waited for this answer
}

type eventKind int

const (
	answeredOK eventKind = iota // a request answered, every message queued or duplicate
	failedNotStored
	failedUnknown
	timedOut
	refused // a 503, or no responders
)

// ledger is every producer's record: what was sent, every answer, and
// the events in time order. It is compact (a message is its producer and
// sequence number; its id and data are derived from them), because a
// ten-minute soak sends millions.
type ledger struct {
	mu      sync.Mutex
	parts   []partLedger // by partition number
	events  []event
	retries int64
}

type partLedger struct {
	sent    []msgKey
	answers []answerRec
}

// msgKey names a message: its producer and sequence number.
type msgKey struct {
	producer uint16
	seq      uint32
}

// answerRec is one queued or duplicate answer. messagePID is the
// partition id the answer's messageId names, -1 when the messageId does
// not name the answered offset.
type answerRec struct {
	msgKey
	duplicate  bool
	offset     int64
	messagePID int64
	arrived    time.Time // the answer came
}

func newLedger(partitions int) *ledger { return &ledger{parts: make([]partLedger, partitions)} }

func (l *ledger) note(e event) {
	l.mu.Lock()
	l.events = append(l.events, e)
	l.mu.Unlock()
}

// mark is where the events noted from now on start, for answeredSince.
func (l *ledger) mark() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.events)
}

// answeredSince counts the producers with a request answered stored
// among the events noted since mark, at or after t.
func (l *ledger) answeredSince(mark int, t time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	seen := map[int]bool{}
	for _, e := range l.events[mark:] {
		if e.kind == answeredOK && !e.at.Before(t) {
			seen[e.producer] = true
		}
	}
	return len(seen)
}

// messageIDOf is a message's transactionId.
func messageIDOf(k msgKey) string { return fmt.Sprintf("c%d-%d", k.producer, k.seq) }

// payloadOf is a message's data.
func payloadOf(k msgKey) string {
	return fmt.Sprintf(`{"producer":%d,"seq":%d,"pad":"%s"}`, k.producer, k.seq, strings.Repeat("x", 60))
}

// A third of the messages carry headers (a traceparent among them), and
// a third are binary data: the faults must lose or change neither.
func (k msgKey) headers() string {
	if k.seq%3 != 1 {
		return ""
	}
	return fmt.Sprintf(`{"traceparent":"00-%032x-%016x-01","x-seq":"%d"}`, k.seq, k.producer+1, k.seq)
}

func (k msgKey) binary() bool { return k.seq%3 == 2 }

// storedOf is a message's data and meta as the log keeps them (the
// gateway's form of its headers and data encoding).
func storedOf(k msgKey) (data, meta string) {
	switch {
	case k.binary():
		return `"` + base64.StdEncoding.EncodeToString([]byte(payloadOf(k))) + `"`, `{"dataEncoding":"base64"}`
	case k.headers() != "":
		return payloadOf(k), `{"headers":` + k.headers() + `}`
	}
	return payloadOf(k), ""
}

// partitionName is partition number i's name.
func partitionName(i int) string { return fmt.Sprintf("p%d", i) }

// expected gives the verifier one partition at a time.
func (l *ledger) expected() verify.Expected {
	return ledgerExpected{l}
}

type ledgerExpected struct{ l *ledger }

func (e ledgerExpected) Partitions() []string {
	names := make([]string, len(e.l.parts))
	for i := range names {
		names[i] = partitionName(i)
	}
	return names
}

func (e ledgerExpected) Partition(i int) ([]verify.Sent, []verify.Answer) {
	pl := &e.l.parts[i]
	name := partitionName(i)
	sent := make([]verify.Sent, len(pl.sent))
	for j, k := range pl.sent {
		data, meta := storedOf(k)
		sent[j] = verify.Sent{Partition: name, ID: messageIDOf(k), Data: data, Meta: meta}
	}
	answers := make([]verify.Answer, len(pl.answers))
	for j, a := range pl.answers {
		status, mid := "queued", "(not naming its offset)"
		if a.duplicate {
			status = "duplicate"
		}
		if a.messagePID >= 0 {
			mid = verify.MessageID(a.messagePID, a.offset)
		}
		answers[j] = verify.Answer{Partition: name, ID: messageIDOf(a.msgKey), Status: status, Offset: a.offset, MessageID: mid, Arrived: a.arrived}
	}
	return sent, answers
}

// unanswered counts sent messages that never got a stored answer.
func (l *ledger) unanswered() int64 {
	var n int64
	for _, pl := range l.parts {
		answered := make(map[msgKey]bool, len(pl.answers))
		for _, a := range pl.answers {
			answered[a.msgKey] = true
		}
		for _, k := range pl.sent {
			if !answered[k] {
				n++
			}
		}
	}
	return n
}

// message is one message on the wire.
type message struct{ key msgKey }

func (m message) MarshalJSON() ([]byte, error) {
	data, _ := storedOf(m.key)
	b := fmt.Appendf(nil, `{"transactionId":%q,"data":%s`, messageIDOf(m.key), data)
	if m.key.binary() {
		b = append(b, `,"dataEncoding":"base64"`...)
	}
	if h := m.key.headers(); h != "" {
		b = append(append(b, `,"headers":`...), h...)
	}
	return append(b, '}'), nil
}

// wireAnswer is one entry of a push's answer.
type wireAnswer struct {
	Index     int    `json:"index"`
	Status    string `json:"status"`
	Offset    *int64 `json:"offset"`
	MessageID string `json:"messageId"`
	Error     string `json:"error"`
}

// producer sends requests at its share of the rate until stop, then
// finishes what it has not had answered (drain), retrying every failed
// or unanswered message with the same id and data, as a careful client
// does.
type producer struct {
	index int
	queue string
	load  load
	nc    *nats.Conn
	led   *ledger
	rng   *rand.Rand
	// answered holds this producer's messages answered as stored, by
	// partition number, oldest first, for repeats.
	answered [][]answeredAt
	seq      uint32
}

func (p *producer) run(ctx context.Context, stop <-chan struct{}) {
	every := time.Duration(float64(time.Second) * float64(p.load.Batch*p.load.Producers) / float64(p.load.Rate))
	next := time.Now()
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-time.After(time.Until(next)):
		}
		next = next.Add(every)
		if behind := time.Since(next); behind > time.Second {
			next = time.Now() // a long stall is not made up for in a burst
		}
		partition := p.rng.IntN(p.load.Partitions)
		p.deliver(ctx, partition, p.compose(partition))
	}
}

// answeredAt is a message answered as stored, and when.
type answeredAt struct {
	seq uint32
	at  time.Time
}

// compose makes a request: new ids, and repeats of ids answered within
// RepeatWithin.
func (p *producer) compose(partition int) []message {
	msgs := make([]message, 0, p.load.Batch)
	seen := map[uint32]bool{}
	old := p.answered[partition]
	for len(old) > 0 && time.Since(old[0].at) > p.load.RepeatWithin {
		old = old[1:]
	}
	p.answered[partition] = old
	for range p.load.Batch {
		if len(old) > 0 && p.rng.Float64() < p.load.RetryShare {
			if seq := old[p.rng.IntN(len(old))].seq; !seen[seq] {
				seen[seq] = true
				msgs = append(msgs, message{msgKey{uint16(p.index), seq}})
				continue
			}
		}
		p.seq++
		k := msgKey{uint16(p.index), p.seq}
		seen[p.seq] = true
		msgs = append(msgs, message{k})
		p.led.mu.Lock()
		p.led.parts[partition].sent = append(p.led.parts[partition].sent, k)
		p.led.mu.Unlock()
	}
	return msgs
}

// deliver sends msgs until each is answered queued or duplicate, or ctx
// ends.
func (p *producer) deliver(ctx context.Context, partition int, msgs []message) {
	subject := fmt.Sprintf("queen.push.%s.%s", p.queue, partitionName(partition))
	backoff := 50 * time.Millisecond
	for first := true; len(msgs) > 0 && ctx.Err() == nil; first = false {
		if !first {
			p.led.mu.Lock()
			p.led.retries++
			p.led.mu.Unlock()
			world.Sleep(ctx, backoff)
			backoff = min(2*backoff, time.Second)
		}
		msgs = p.attempt(subject, partition, msgs)
	}
}

// attempt sends one request and returns the messages still to send.
func (p *producer) attempt(subject string, partition int, msgs []message) []message {
	body, _ := json.Marshal(msgs)
	sentAt := time.Now()
	reply, err := p.nc.Request(subject, body, p.load.Timeout)
	now := time.Now()
	note := func(kind eventKind, n int) {
		p.led.note(event{at: now, producer: p.index, kind: kind, n: n, wait: now.Sub(sentAt)})
	}
	switch {
	case errors.Is(err, nats.ErrTimeout):
		note(timedOut, len(msgs))
		return msgs
	case err != nil:
		note(refused, len(msgs))
		return msgs
	case reply.Header.Get("Nats-Service-Error-Code") != "":
		note(refused, len(msgs))
		return msgs
	}
	var answers []wireAnswer
	if err := json.Unmarshal(reply.Data, &answers); err != nil || len(answers) != len(msgs) {
		note(refused, len(msgs))
		return msgs
	}
	var again []message
	var notStored, unknown int
	p.led.mu.Lock()
	for i, a := range answers {
		m := msgs[i]
		if a.Status == "failed" || a.Offset == nil {
			again = append(again, m)
			if strings.Contains(a.Error, "not stored") {
				notStored++
			} else {
				unknown++
			}
			continue
		}
		rec := answerRec{msgKey: m.key, duplicate: a.Status == "duplicate", offset: *a.Offset, messagePID: messagePID(a.MessageID, *a.Offset), arrived: now}
		p.led.parts[partition].answers = append(p.led.parts[partition].answers, rec)
		if a.Status == "queued" {
			p.answered[partition] = append(p.answered[partition], answeredAt{m.key.seq, now})
		}
	}
	p.led.mu.Unlock()
	switch {
	case notStored > 0:
		note(failedNotStored, notStored)
	case unknown > 0:
		note(failedUnknown, unknown)
	}
	if stored := len(msgs) - len(again); stored > 0 {
		note(answeredOK, stored)
	}
	return again
}

// messagePID is the partition id a messageId names, or -1 when it is not
// a messageId of offset.
func messagePID(id string, offset int64) int64 {
	pid, off, ok := verify.ParseMessageID(id)
	if !ok || off != offset {
		return -1
	}
	return pid
}
