package consume

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/gateway"
	"github.com/queengate/queengate/internal/wire"
	"github.com/queengate/queengate/model"
)

var (
	ackPushShape = wire.Shape{Name: "an ack-and-push", Example: `{"group": "...", "leaseId": "...", "items": [{"offset": 7, "status": "completed"}], ` +
		`"push": [{"queue": "...", "partition": "...", "transactionId": "...", "data": {...}}]}`}
	derivedShape = wire.Shape{Name: "a derived message", Example: `{"queue": "...", "partition": "...", "transactionId": "...", "data": {...}}`}
)

// ackPush completes a lease's items and pushes derived messages in one
// transaction (docs/protocol.md, "Ack and push").
func (c *Consumers) ackPush(ctx context.Context, queue, partition string, body []byte) (any, *queengate.Error) {
	if werr := gateway.ValidPlace(queue, partition); werr != nil {
		return nil, werr
	}
	req, werr := decodeAckPush(body, c.maxPayload())
	if werr != nil {
		return nil, werr
	}
	items, _ := ackItems(queengate.AckRequest{Group: req.Group, LeaseID: req.LeaseID, Items: req.Items}) // checked by decodeAckPush
	g, pid, werr := c.place(ctx, queue, partition, req.Group)
	if werr != nil {
		return nil, werr
	}
	c.activity.note(g.ID)
	derived := make([]model.Derived, len(req.Push))
	for i, m := range req.Push {
		derived[i] = model.Derived{Queue: m.Queue, Partition: m.Partition, TxnID: m.TransactionID, Data: m.Data, Meta: derivedMeta(m)}
	}
	res, err := c.store.AckAndPush(ctx, g, pid, req.LeaseID, items, derived)
	switch {
	case errors.Is(err, model.ErrNotCommitted):
		return nil, &queengate.Error{Code: queengate.CodeConflict, Text: err.Error()}
	case err != nil:
		return nil, c.groupFailed(g, err)
	}
	c.metrics.acked(queue, g.Name, items, &res.Ack)
	ans := ackPushAnswer(req, res)
	c.settled(queue, ans.AckAnswer)
	c.freedRoom(queue, res.Ack)
	c.announcePushed(ans.Pushed)
	return ans, nil
}

// ackPushAnswer is what an ack-and-push that committed answers.
func ackPushAnswer(req queengate.AckPushRequest, res model.AckPushResult) queengate.AckPushAnswer {
	ans := queengate.AckPushAnswer{AckAnswer: queengate.AckAnswer{Items: make([]queengate.AckResult, len(res.Ack.Items)),
		NextOffset: res.Ack.NextOffset, LeaseEnded: res.Ack.LeaseEnded}, Pushed: make([]queengate.PushedMessage, len(res.Pushed))}
	for i, o := range res.Ack.Items {
		off := o.Offset // every item resolved: acked or alreadyAcked
		ans.Items[i] = queengate.AckResult{Index: i, TransactionID: req.Items[i].TransactionID, Offset: &off, Result: o.Result}
	}
	for i, o := range res.Pushed {
		m := req.Push[i]
		status := queengate.StatusQueued
		if o.Duplicate {
			status = queengate.StatusDuplicate
		}
		ans.Pushed[i] = queengate.PushedMessage{Index: i, Queue: m.Queue, Partition: m.Partition, TransactionID: m.TransactionID,
			Status: status, PartitionID: o.PartitionID, MessageID: model.MessageID(o.PartitionID, o.Offset), Offset: o.Offset,
			Conflict: o.Conflict}
	}
	return ans
}

// announcePushed wakes the pops waiting on the queues that got messages.
func (c *Consumers) announcePushed(pushed []queengate.PushedMessage) {
	announced := map[string]bool{}
	for _, p := range pushed {
		if p.Status == queengate.StatusQueued && !announced[p.Queue] {
			announced[p.Queue] = true
			c.announce(p.Queue)
		}
	}
}

// decodeAckPush reads an ack-and-push body strictly: every problem is a
// 400 (a 413 for data or an answer too large) naming it, found before
// anything is done.
func decodeAckPush(body []byte, maxPayload int64) (queengate.AckPushRequest, *queengate.Error) {
	var req queengate.AckPushRequest
	werr := wire.DecodeObject(body, wire.TheBody, ackPushShape,
		wire.Field{Name: "group", Decode: wire.NameInto("group", &req.Group)},
		wire.Field{Name: "leaseId", Decode: wire.LeaseIDInto(&req.LeaseID)},
		wire.Field{Name: "items", Decode: ackItemsInto(&req.Items)},
		wire.Field{Name: "push", Decode: derivedInto(&req.Push, maxPayload)},
	)
	if werr != nil {
		return req, werr
	}
	if _, werr := ackItems(queengate.AckRequest{Group: req.Group, LeaseID: req.LeaseID, Items: req.Items}); werr != nil {
		return req, werr
	}
	for i, it := range req.Items {
		if it.Status != queengate.AckCompleted {
			return req, wire.BadInput(`item %d: status %q: an ack-and-push completes its items; fail a message with an ack`, i, it.Status)
		}
	}
	if bound, room := ackPushAnswerBound(req), maxPayload-popEnvelope; bound > room {
		return req, &queengate.Error{Code: queengate.CodeTooLarge, Text: fmt.Sprintf(
			"an ack-and-push of %d items and %d messages could take up to %d bytes to answer, over the %d an answer may take here: send fewer in one request",
			len(req.Items), len(req.Push), bound, room)}
	}
	return req, nil
}

// derivedInto decodes the derived messages: 0 to
// queengate.MaxAckPushMessages objects of derivedShape, each data within
// what a push accepts.
func derivedInto(dst *[]queengate.DerivedMessage, maxPayload int64) func([]byte) *queengate.Error {
	return func(raw []byte) *queengate.Error {
		elems, ok := wire.ScanArray(raw)
		switch {
		case !ok:
			return wire.BadInput(`"push" must be an array of messages such as %s, not %s`, derivedShape.Example, wire.Describe(raw))
		case len(elems) > queengate.MaxAckPushMessages:
			return &queengate.Error{Code: queengate.CodeTooLarge, Text: fmt.Sprintf(
				`"push" has %d messages: at most %d in one ack-and-push`, len(elems), queengate.MaxAckPushMessages)}
		}
		msgs := make([]queengate.DerivedMessage, len(elems))
		for i, e := range elems {
			if werr := decodeDerived(e, i, &msgs[i], maxPayload); werr != nil {
				return werr
			}
		}
		*dst = msgs
		return nil
	}
}

// decodeDerived reads derived message i: a queue, a partition
// (DefaultPartition when absent), a transactionId (required: a retry is
// recognised by it) and data.
func decodeDerived(raw []byte, i int, m *queengate.DerivedMessage, maxPayload int64) *queengate.Error {
	where := func() string { return "push " + strconv.Itoa(i) }
	var encoding []byte
	keep := func(dst *[]byte) func([]byte) *queengate.Error {
		return func(raw []byte) *queengate.Error { *dst = raw; return nil }
	}
	werr := wire.DecodeObjectAt(raw, where, derivedShape,
		wire.Field{Name: "queue", Decode: wire.NameInto("queue", &m.Queue)},
		wire.Field{Name: "partition", Decode: wire.NameInto("partition", &m.Partition)},
		wire.Field{Name: "transactionId", Decode: wire.StringInto("transactionId", &m.TransactionID)},
		wire.Field{Name: "data", Decode: keep((*[]byte)(&m.Data))},
		wire.Field{Name: "headers", Decode: keep((*[]byte)(&m.Headers))},
		wire.Field{Name: "dataEncoding", Decode: keep(&encoding)},
	)
	if werr != nil {
		return werr
	}
	data, meta, why := wire.Payload(m.Data, m.Headers, encoding)
	if why != "" {
		return wire.BadInput("%s: %s", where(), why)
	}
	m.Data, m.DataEncoding = data, model.DataEncoding(meta)
	if werr := wire.CheckDataSize(data, meta, maxPayload); werr != nil {
		werr.Text = where() + ": " + werr.Text
		return werr
	}
	switch {
	case m.Queue == "":
		return wire.BadInput(`%s: "queue" is missing: the queue it goes to`, where())
	case m.TransactionID == "" || len(m.TransactionID) > queengate.MaxTxnIDBytes:
		return wire.BadInput(`%s: "transactionId" must be a string of 1-%d bytes (derive it from the input's, so that a retry is recognised)`,
			where(), queengate.MaxTxnIDBytes)
	}
	if m.Partition == "" {
		m.Partition = queengate.DefaultPartition
	}
	return nil
}

// derivedMeta is the meta a derived message decoded by decodeDerived
// stores (its headers checked there, its data made canonical).
func derivedMeta(m queengate.DerivedMessage) []byte {
	var encoding []byte
	if m.DataEncoding != "" {
		encoding = []byte(`"` + m.DataEncoding + `"`)
	}
	_, meta, _ := wire.Payload(m.Data, m.Headers, encoding)
	return meta
}

// ackPushAnswerBound is the most an ack-and-push's answer can take,
// encoded: the ack's, and per derived message its names, its
// transactionId and the fixed fields.
func ackPushAnswerBound(req queengate.AckPushRequest) int64 {
	const perMessage = 256 // index, status, partitionId, messageId, offset, conflict and the field names
	n := ackAnswerBound(req.Items)
	for _, m := range req.Push {
		n += perMessage + int64(len(m.Queue)+len(m.Partition)) + wire.MarshalledStringBound(m.TransactionID)
	}
	return n
}
