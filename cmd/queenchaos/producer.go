package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// load is what the producers offer.
type load struct {
	Producers  int
	Partitions int
	Batch      int     // messages per request
	Rate       int     // messages per second offered, all producers together
	RetryShare float64 // share of messages repeating an id already answered
	Timeout    time.Duration
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
// the events in time order (per producer).
type ledger struct {
	mu      sync.Mutex
	sent    []Sent
	answers []Answer
	events  []event
	retries int64
}

func (l *ledger) note(e event) {
	l.mu.Lock()
	l.events = append(l.events, e)
	l.mu.Unlock()
}

// message is one message a producer sends, kept until answered.
type message struct {
	ID   string `json:"transactionId"`
	Data json.RawMessage
}

func (m message) MarshalJSON() ([]byte, error) {
	return []byte(fmt.Sprintf(`{"transactionId":%q,"data":%s}`, m.ID, m.Data)), nil
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
	// answered holds ids answered as stored, by partition, for repeats.
	answered map[string][]message
	seq      int
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
		partition := fmt.Sprintf("p%d", p.rng.IntN(p.load.Partitions))
		p.deliver(ctx, partition, p.compose(partition))
	}
}

// compose makes a request: new ids, and repeats of ids already answered.
func (p *producer) compose(partition string) []message {
	msgs := make([]message, 0, p.load.Batch)
	seen := map[string]bool{}
	for range p.load.Batch {
		old := p.answered[partition]
		if len(old) > 0 && p.rng.Float64() < p.load.RetryShare {
			m := old[p.rng.IntN(len(old))]
			if !seen[m.ID] {
				seen[m.ID] = true
				msgs = append(msgs, m)
				continue
			}
		}
		p.seq++
		id := fmt.Sprintf("c%d-%d", p.index, p.seq)
		m := message{ID: id, Data: json.RawMessage(fmt.Sprintf(`{"producer":%d,"seq":%d,"pad":"%s"}`, p.index, p.seq, strings.Repeat("x", 60)))}
		seen[id] = true
		msgs = append(msgs, m)
		p.led.mu.Lock()
		p.led.sent = append(p.led.sent, Sent{Partition: partition, ID: id, Data: string(m.Data)})
		p.led.mu.Unlock()
	}
	return msgs
}

// deliver sends msgs until each is answered queued or duplicate, or ctx
// ends.
func (p *producer) deliver(ctx context.Context, partition string, msgs []message) {
	subject := fmt.Sprintf("queen.push.%s.%s", p.queue, partition)
	backoff := 50 * time.Millisecond
	for first := true; len(msgs) > 0 && ctx.Err() == nil; first = false {
		if !first {
			p.led.mu.Lock()
			p.led.retries++
			p.led.mu.Unlock()
			sleep(ctx, backoff)
			backoff = min(2*backoff, time.Second)
		}
		msgs = p.attempt(subject, partition, msgs)
	}
}

// attempt sends one request and returns the messages still to send.
func (p *producer) attempt(subject, partition string, msgs []message) []message {
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
		p.led.answers = append(p.led.answers, Answer{Partition: partition, ID: m.ID, Status: a.Status, Offset: *a.Offset, MessageID: a.MessageID})
		if a.Status == "queued" {
			p.answered[partition] = append(p.answered[partition], m)
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

// ready reports whether a gateway's /readyz answers 200.
func ready(ctx context.Context, admin string) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+admin+"/readyz", nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
