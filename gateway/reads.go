package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"strconv"
	"time"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/model"
)

// LogReader is what reading needs from the store.
type LogReader interface {
	Read(ctx context.Context, r model.ReadRequest) (model.ReadResult, error)
	MessageAt(ctx context.Context, pid, offset int64) (m model.StoredMessage, queue, partition string, err error)
	FindTxn(ctx context.Context, queue, partition, txnID string) (model.TxnLookup, error)
}

// Read answers a read of queue/partition (the NATS face: a JSON body).
func (o *Ops) Read(ctx context.Context, queue, partition string, body []byte) (any, *queengate.Error) {
	req, werr := decodeRead(body)
	if werr != nil {
		return nil, werr
	}
	return o.read(ctx, queue, partition, req)
}

// ReadQuery answers a read given as URL parameters (the HTTP face).
func (o *Ops) ReadQuery(ctx context.Context, queue, partition string, q url.Values) (any, *queengate.Error) {
	var req queengate.ReadRequest
	for name, vals := range q {
		if len(vals) != 1 {
			return nil, badInput("%s is given %d times: give it once", name, len(vals))
		}
		n, err := strconv.ParseInt(vals[0], 10, 64)
		if err != nil {
			return nil, badInput("%s=%q: want a whole number", name, vals[0])
		}
		if werr := setReadField(&req, name, n, "parameter"); werr != nil {
			return nil, werr
		}
	}
	return o.read(ctx, queue, partition, req)
}

func decodeRead(body []byte) (queengate.ReadRequest, *queengate.Error) {
	var req queengate.ReadRequest
	if len(bytes.TrimSpace(body)) == 0 {
		return req, nil
	}
	fields, err := scanObject(body, "the body")
	if err != nil {
		return req, badInput("%v; want {\"from\": 0, \"max\": 1000, \"maxBytes\": 524288}", err)
	}
	for _, f := range fields {
		var n int64
		if json.Unmarshal(f.raw, &n) != nil {
			return req, badInput("%q must be a whole number, not %s", f.key, f.raw)
		}
		if werr := setReadField(&req, f.key, n, "field"); werr != nil {
			return req, werr
		}
	}
	return req, nil
}

// setReadField sets one of a read's numbers, given as a body field or a
// URL parameter (what).
func setReadField(req *queengate.ReadRequest, name string, n int64, what string) *queengate.Error {
	switch name {
	case "from":
		req.From = n
	case "max":
		req.Max = int(min(n, math.MaxInt32))
	case "maxBytes":
		req.MaxBytes = n
	default:
		return badInput("unknown %s %q: a read takes from, max and maxBytes", what, name)
	}
	return nil
}

func (o *Ops) read(ctx context.Context, queue, partition string, req queengate.ReadRequest) (any, *queengate.Error) {
	if werr := validPlace(queue, partition); werr != nil {
		return nil, werr
	}
	switch {
	case req.From < 0:
		return nil, badInput("from is %d: offsets start at 0", req.From)
	case req.Max < 0 || req.Max > queengate.MaxReadMax:
		return nil, badInput("max is %d: 1 to %d (0 or absent: %d)", req.Max, queengate.MaxReadMax, queengate.DefaultReadMax)
	case req.MaxBytes < 0:
		return nil, badInput("maxBytes is %d: at least 1 (0 or absent: %d)", req.MaxBytes, queengate.DefaultReadMaxBytes)
	}
	if req.Max == 0 {
		req.Max = queengate.DefaultReadMax
	}
	budget := int64(o.answerBudget())
	if req.MaxBytes == 0 || req.MaxBytes > budget {
		req.MaxBytes = min(int64(queengate.DefaultReadMaxBytes), budget)
	}
	res, err := o.reads.Read(ctx, model.ReadRequest{Queue: queue, Partition: partition, From: req.From, Max: req.Max, MaxBytes: req.MaxBytes})
	if err != nil {
		return nil, readError(err)
	}
	ans := readAnswer(queue, partition, req.From, res)
	// The bytes bound counts data only: trim until the answer fits in one
	// NATS message.
	raw := encodeRead(&ans)
	for len(ans.Messages) > 1 && len(raw) > int(budget) {
		ans.Messages = ans.Messages[:len(ans.Messages)/2]
		ans.Next = ans.Messages[len(ans.Messages)-1].Offset + 1
		raw = encodeRead(&ans)
	}
	if len(raw) > int(budget) {
		return nil, tooLargeToAnswer(fmt.Sprintf("the message at offset %d", ans.Messages[0].Offset), len(raw), int(budget))
	}
	return raw, nil
}

func readAnswer(queue, partition string, from int64, res model.ReadResult) queengate.ReadAnswer {
	ans := queengate.ReadAnswer{Queue: queue, Partition: partition, PartitionID: res.PartitionID,
		Messages: make([]queengate.StoredMessage, len(res.Messages)), Next: res.Next,
		FirstOffset: res.FirstOffset, LastOffset: res.LastOffset, Purged: from < res.FirstOffset}
	for i, m := range res.Messages {
		ans.Messages[i] = storedView(m)
	}
	return ans
}

func storedView(m model.StoredMessage) queengate.StoredMessage {
	return queengate.StoredMessage{Offset: m.Offset, MessageID: model.MessageID(m.PartitionID, m.Offset),
		TransactionID: m.TxnID, CreatedAt: m.CreatedAt, Data: json.RawMessage(m.Data)}
}

func validPlace(queue, partition string) *queengate.Error {
	if !queengate.ValidName(queue) {
		return badInput("bad queue name %q: %s", queue, queengate.NameRule)
	}
	if !queengate.ValidName(partition) {
		return badInput("bad partition name %q: %s", partition, queengate.NameRule)
	}
	return nil
}

// readError maps a store failure of a read: not found is a 404.
func readError(err error) *queengate.Error {
	if errors.Is(err, model.ErrNotFound) {
		return &queengate.Error{Code: queengate.CodeNotFound, Message: err.Error()}
	}
	return storeError(err)
}

// GetMessage answers a message by id, or by queue, partition and
// transactionId (the NATS face: a JSON body).
func (o *Ops) GetMessage(ctx context.Context, body []byte) (any, *queengate.Error) {
	const shape = `{"messageId": "..."} or {"queue": "...", "partition": "...", "transactionId": "..."}`
	fields, err := scanObject(body, "the body")
	if err != nil {
		return nil, badInput("%v; want %s", err, shape)
	}
	var req queengate.GetRequest
	for _, f := range fields {
		v, ok := decodeString(f.raw)
		if !ok {
			return nil, badInput("%q must be a string, not %s", f.key, f.raw)
		}
		switch f.key {
		case "messageId":
			req.MessageID = v
		case "queue":
			req.Queue = v
		case "partition":
			req.Partition = v
		case "transactionId":
			req.TransactionID = v
		default:
			return nil, badInput("unknown field %q: want %s", f.key, shape)
		}
	}
	switch {
	case req.MessageID != "" && req.Queue+req.Partition+req.TransactionID == "":
		return o.MessageByID(ctx, req.MessageID)
	case req.MessageID == "" && req.Queue != "" && req.Partition != "" && req.TransactionID != "":
		return o.MessageByTxn(ctx, req.Queue, req.Partition, req.TransactionID)
	}
	return nil, badInput("name one message: %s", shape)
}

// MessageByID answers the message a messageId names.
func (o *Ops) MessageByID(ctx context.Context, id string) (any, *queengate.Error) {
	pid, offset, err := model.ParseMessageID(id)
	if err != nil {
		return nil, badInput("bad messageId %q: 36 characters shaped like a UUID, as a push answers it", id)
	}
	m, queue, partition, err := o.reads.MessageAt(ctx, pid, offset)
	if err != nil {
		return nil, readError(err)
	}
	raw := encodeMessage(&queengate.MessageAnswer{Queue: queue, Partition: partition, PartitionID: pid, StoredMessage: storedView(m)})
	if budget := o.answerBudget(); len(raw) > budget {
		return nil, tooLargeToAnswer("message "+id, len(raw), budget)
	}
	return raw, nil
}

// MessageByTxn answers the message a transactionId names in a partition:
// the copy a duplicate would name (within the window).
func (o *Ops) MessageByTxn(ctx context.Context, queue, partition, txnID string) (any, *queengate.Error) {
	if werr := validPlace(queue, partition); werr != nil {
		return nil, werr
	}
	l, err := o.reads.FindTxn(ctx, queue, partition, txnID)
	if err != nil {
		return nil, readError(err)
	}
	if !l.Found {
		return nil, &queengate.Error{Code: queengate.CodeNotFound, Message: fmt.Sprintf(
			"transactionId %q is not stored in %s/%s within the queue's window (%ds)", txnID, queue, partition, l.WindowSeconds)}
	}
	if !l.Retained {
		return nil, &queengate.Error{Code: queengate.CodeNotFound, Message: fmt.Sprintf(
			"transactionId %q was stored at offset %d of %s/%s, and retention has deleted the message since (the id still counts for deduplication)", txnID, l.Offset, queue, partition)}
	}
	return o.MessageByID(ctx, model.MessageID(l.PartitionID, l.Offset))
}

// Explain answers what a push of a transactionId to queue/partition
// would be answered now, and why (the NATS face: a JSON body).
func (o *Ops) Explain(ctx context.Context, queue, partition string, body []byte) (any, *queengate.Error) {
	fields, err := scanObject(body, "the body")
	if err != nil {
		return nil, badInput(`%v; want {"transactionId": "..."}`, err)
	}
	var txnID string
	for _, f := range fields {
		v, ok := decodeString(f.raw)
		if f.key != "transactionId" || !ok {
			return nil, badInput(`the body has one field, "transactionId", a string; got %q: %s`, f.key, f.raw)
		}
		txnID = v
	}
	return o.ExplainTxn(ctx, queue, partition, txnID)
}

// ExplainTxn explains the verdict of transactionId txnID.
func (o *Ops) ExplainTxn(ctx context.Context, queue, partition, txnID string) (any, *queengate.Error) {
	if werr := validPlace(queue, partition); werr != nil {
		return nil, werr
	}
	if txnID == "" {
		return nil, badInput("transactionId is missing or empty")
	}
	l, err := o.reads.FindTxn(ctx, queue, partition, txnID)
	if err != nil {
		return nil, readError(err)
	}
	ans := queengate.ExplainAnswer{Queue: queue, Partition: partition, TransactionID: txnID, Verdict: "new", WindowSeconds: l.WindowSeconds}
	if l.Found {
		window := time.Duration(l.WindowSeconds) * time.Second
		ans.Verdict = "duplicate"
		ans.Original = &queengate.ExplainOriginal{Offset: l.Offset, MessageID: model.MessageID(l.PartitionID, l.Offset),
			CreatedAt: l.CreatedAt, CoveredUntil: l.CreatedAt.Add(window), Retained: l.Retained}
	}
	ans.Cache = o.explainCache(l, model.HashTxnID(txnID))
	ans.Explanation = explanation(ans, l.DBNow)
	return ans, nil
}

// explainCache is what this gateway's cache knows of the id, and the path
// a push of it would take.
func (o *Ops) explainCache(l model.TxnLookup, h model.Hash) queengate.ExplainCache {
	look := o.ing.CacheLookup(l.PartitionID, h)
	c := queengate.ExplainCache{State: look.State, Holds: len(look.Offsets) > 0 || look.Wide, Offsets: look.Offsets, VerifiedUpto: look.VerifiedUpto}
	switch {
	case l.WindowSeconds == 0:
		c.Path = "none"
	case look.State != "vouching" || look.Wide:
		c.Path = "full"
	case len(look.Offsets) > 0:
		c.Path = "narrowed"
	default:
		c.Path = "skip"
	}
	return c
}

func explanation(a queengate.ExplainAnswer, now time.Time) string {
	var verdict string
	switch {
	case a.WindowSeconds == 0:
		verdict = "The queue's window is 0: deduplication is off, and a push is stored whatever its transactionId."
	case a.Original == nil:
		verdict = fmt.Sprintf("Not stored in this partition within the last %ds: a push now is stored (queued).", a.WindowSeconds)
	default:
		o := a.Original
		verdict = fmt.Sprintf("Stored at offset %d (%s) at %s: a push now answers duplicate naming it, until %s (%s from now), when the %ds window stops covering it.",
			o.Offset, o.MessageID, o.CreatedAt.UTC().Format(time.RFC3339), o.CoveredUntil.UTC().Format(time.RFC3339),
			o.CoveredUntil.Sub(now).Round(time.Second), a.WindowSeconds)
		if !o.Retained {
			verdict += " Retention has deleted the message itself; its transactionId still counts."
		}
	}
	path := map[string]string{
		"none":     "",
		"skip":     " This gateway's cache vouches for the partition and does not hold the id: its push would skip the probe.",
		"narrowed": " This gateway's cache holds the id: its push would check only the offsets it holds.",
		"full":     fmt.Sprintf(" This gateway's cache cannot vouch for the partition (%s): its push would probe the whole window.", a.Cache.State),
	}[a.Cache.Path]
	return verdict + path
}
