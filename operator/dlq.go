package operator

import (
	"context"
	"errors"
	"fmt"
	"math"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/gateway"
	"github.com/queengate/queengate/internal/wire"
	"github.com/queengate/queengate/model"
)

// DeadLetterStore is what listing and redriving dead letters need.
type DeadLetterStore interface {
	DeadLetters(ctx context.Context, queue, partition string, f model.DeadLetterFilter, limit int) ([]model.PendingDeadLetter, int, bool, error)
	Redrive(ctx context.Context, queue, partition string, f model.DeadLetterFilter, limit int) (model.Redriven, error)
}

var deadLettersShape = wire.Shape{Name: "a dead-letter selection",
	Example: `{"partition": "eu", "group": "billing", "fromOffset": 0, "toOffset": 99, "limit": 100}, or no body`}

// decodeDeadLetters reads a dead-letter list or redrive body strictly;
// every field is optional.
func decodeDeadLetters(body []byte) (queengate.DeadLettersRequest, *queengate.Error) {
	var req queengate.DeadLettersRequest
	if wire.Blank(body) {
		return req, nil
	}
	offsetInto := func(name string, dst **int64) func([]byte) *queengate.Error {
		return func(raw []byte) *queengate.Error {
			var n int64
			if werr := wire.WholeNumberInto(name, 0, math.MaxInt64, &n)(raw); werr != nil {
				return werr
			}
			*dst = &n
			return nil
		}
	}
	werr := wire.DecodeObject(body, wire.TheBody, deadLettersShape,
		wire.Field{Name: "partition", Decode: wire.NameInto("partition", &req.Partition)},
		wire.Field{Name: "group", Decode: wire.NameInto("group", &req.Group)},
		wire.Field{Name: "fromOffset", Decode: offsetInto("fromOffset", &req.FromOffset)},
		wire.Field{Name: "toOffset", Decode: offsetInto("toOffset", &req.ToOffset)},
		wire.Field{Name: "limit", Decode: wire.WholeNumberInto("limit", 1, queengate.MaxRedrive, &req.Limit)},
	)
	if werr == nil && req.FromOffset != nil && req.ToOffset != nil && *req.FromOffset > *req.ToOffset {
		werr = wire.BadInput(`"fromOffset" %d is above "toOffset" %d: the range is inclusive, from the lower offset`, *req.FromOffset, *req.ToOffset)
	}
	return req, werr
}

// deadLetterPartitions decodes a list's or redrive's body, and finds the
// partitions of queue's dead-letter queue it selects, in name order; none
// when it has none.
func (o *Ops) deadLetterPartitions(ctx context.Context, queue string, body []byte) (queengate.DeadLettersRequest, []string, *queengate.Error) {
	req, werr := decodeDeadLetters(body)
	if werr == nil {
		werr = gateway.ValidQueue(queue)
	}
	if werr != nil {
		return req, nil, werr
	}
	parts, werr := o.dlqPartitionNames(ctx, queue, req)
	return req, parts, werr
}

func (o *Ops) dlqPartitionNames(ctx context.Context, queue string, req queengate.DeadLettersRequest) ([]string, *queengate.Error) {
	if _, err := o.store.QueueConfig(ctx, queue); err != nil {
		if errors.Is(err, model.ErrQueueNotFound) {
			return nil, &queengate.Error{Code: queengate.CodeNotFound, Text: fmt.Sprintf("queue %q does not exist", queue)}
		}
		return nil, gateway.StoreError(err)
	}
	if req.Partition != "" {
		return []string{req.Partition}, nil
	}
	dlq, err := o.store.QueueConfig(ctx, model.DeadLetterQueue(queue))
	if errors.Is(err, model.ErrQueueNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, gateway.StoreError(err)
	}
	parts, err := o.store.Partitions(ctx, dlq.ID)
	if err != nil {
		return nil, gateway.StoreError(err)
	}
	names := make([]string, len(parts))
	for i, p := range parts {
		names[i] = p.Name
	}
	byName(names, func(n string) string { return n })
	return names, nil
}

func filterOf(req queengate.DeadLettersRequest) model.DeadLetterFilter {
	return model.DeadLetterFilter{Group: req.Group, FromOffset: req.FromOffset, ToOffset: req.ToOffset}
}

func limitOf(req queengate.DeadLettersRequest) int {
	if req.Limit == 0 {
		return queengate.MaxRedrive
	}
	return req.Limit
}

// ListDeadLetters lists queue's dead letters not yet redriven that the
// body selects: what a redrive with the same body would move.
func (o *Ops) ListDeadLetters(ctx context.Context, queue string, body []byte) (any, *queengate.Error) {
	req, parts, werr := o.deadLetterPartitions(ctx, queue, body)
	if werr != nil {
		return nil, werr
	}
	out := queengate.DeadLettersAnswer{Queue: queue, DeadLetters: []queengate.DeadLetterView{}}
	left := limitOf(req)
	for _, p := range parts {
		if left == 0 {
			out.More = true
			break
		}
		pending, skipped, more, err := o.store.DeadLetters(ctx, queue, p, filterOf(req), left)
		if err != nil {
			return nil, gateway.StoreError(err)
		}
		out.Skipped += skipped
		out.More = out.More || more
		for _, d := range pending {
			out.DeadLetters = append(out.DeadLetters, deadLetterView(p, d))
		}
		left -= len(pending)
	}
	fitDeadLetters(&out, o.AnswerBudget())
	return out, nil
}

func deadLetterView(partition string, d model.PendingDeadLetter) queengate.DeadLetterView {
	l := d.Letter
	size := len(l.Data)
	if l.DataOmitted != nil {
		size = l.DataOmitted.Bytes
	}
	return queengate.DeadLetterView{Partition: partition, DLQOffset: d.Offset, Group: l.Group, MessageID: l.MessageID,
		Offset: l.Offset, TransactionID: l.TxnID, CreatedAt: l.CreatedAt.UTC(), Attempts: l.Attempts,
		Error: wire.ClipBytes(l.Error, queengate.MaxListedError), DataBytes: size}
}

// fitDeadLetters keeps the dead letters that fit budget bytes.
func fitDeadLetters(a *queengate.DeadLettersAnswer, budget int) {
	if wire.EncodedLen(a) <= budget {
		return
	}
	list := a.DeadLetters
	a.DeadLetters = nil
	n, _ := wire.Fitting(list, budget-wire.EncodedLen(a)-len(`,"more":true`))
	a.DeadLetters, a.More = list[:n], true
}

// redriveEntry bounds what one partition takes in a redrive's answer
// beside its name (each byte of which JSON may escape to six).
const redriveEntry = 128

// Redrive moves queue's dead letters that the body selects back to their
// partitions, one partition at a time (each in one transaction), while
// the limit and the answer's room last.
func (o *Ops) Redrive(ctx context.Context, queue string, body []byte) (any, *queengate.Error) {
	req, parts, werr := o.deadLetterPartitions(ctx, queue, body)
	if werr != nil {
		return nil, werr
	}
	out := queengate.RedriveAnswer{Queue: queue, Partitions: []queengate.RedrivenPartition{}}
	left, room := limitOf(req), o.AnswerBudget()-wire.EncodedLen(out)-len(`,"skipped":`)-20-len(`,"more":true`)
	for _, p := range parts {
		if left == 0 || room < 6*len(p)+redriveEntry {
			out.More = true
			break
		}
		r, err := o.store.Redrive(ctx, queue, p, filterOf(req), left)
		if err != nil {
			return nil, gateway.StoreError(err)
		}
		out.Skipped += r.Skipped
		out.More = out.More || r.More
		if r.Moved > 0 {
			out.Moved += r.Moved
			out.Partitions = append(out.Partitions, queengate.RedrivenPartition{Partition: p, Moved: r.Moved,
				FirstOffset: r.FirstOffset, LastOffset: r.LastOffset})
			room -= 6*len(p) + redriveEntry
			left -= r.Moved
			if o.publish != nil {
				o.publish([]string{queue}) // wake the queue's waiting pops
			}
		}
	}
	return out, nil
}
