package consume

import (
	"context"
	"errors"
	"math"
	"slices"
	"time"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/gateway"
	"github.com/queengate/queengate/internal/wire"
	"github.com/queengate/queengate/model"
)

// Creating a consumer group with a start position, and seeking one
// (docs/protocol.md, "Consumer groups"). A seek makes work for the
// group's waiting pops: it is announced as a commit to the queue, so
// that every gateway wakes them.

var (
	groupCreateShape = wire.Shape{Name: "a group create", Example: `{"start": "latest"}, {"offsets": {"p0": 42}} or {"time": "2026-12-01T09:00:00Z"}`}
	groupSeekShape   = wire.Shape{Name: "a seek", Example: `{"offset": 0} or {"time": "2026-12-01T09:00:00Z"}, with "partition": "p0" for one partition`}
)

// createGroup creates queue's consumer group at the start position the
// body names; the same create again is answered created false, one with
// another start 409.
func (c *Consumers) createGroup(ctx context.Context, queue, group string, body []byte) (any, *queengate.Error) {
	if werr := validGroupPlace(queue, group); werr != nil {
		return nil, werr
	}
	start, werr := decodeGroupCreate(body)
	if werr != nil {
		return nil, werr
	}
	d, err := c.store.CreateGroup(ctx, queue, group, start)
	if errors.Is(err, model.ErrGroupExists) {
		return nil, &queengate.Error{Code: queengate.CodeConflict, Text: err.Error()}
	}
	if err != nil {
		return nil, consumeError(err)
	}
	return queengate.GroupCreateAnswer{Queue: queue, Group: group, Created: d.Created,
		GroupMoves: groupMoves(d.Moves, c.maxPayload()-movesEnvelope)}, nil
}

// seekGroup moves queue's consumer group (or one partition of it) to an
// offset or a time and says what moved.
func (c *Consumers) seekGroup(ctx context.Context, queue, group string, body []byte) (any, *queengate.Error) {
	if werr := validGroupPlace(queue, group); werr != nil {
		return nil, werr
	}
	seek, werr := decodeSeek(body)
	if werr != nil {
		return nil, werr
	}
	g, moves, err := c.store.SeekGroup(ctx, queue, group, seek)
	if err != nil {
		return nil, c.groupFailed(g, err)
	}
	c.waits.wakeGroup(g.ID)
	if c.publish != nil {
		c.publish([]string{queue}) // the other gateways' waiting pops
	}
	return queengate.GroupSeekAnswer{Queue: queue, Group: group, GroupMoves: groupMoves(moves, c.maxPayload()-movesEnvelope)}, nil
}

// validGroupPlace checks the queue and group names a subject or path
// gives.
func validGroupPlace(queue, group string) *queengate.Error {
	if werr := gateway.ValidQueue(queue); werr != nil {
		return werr
	}
	if !queengate.ValidName(group) {
		return wire.BadInput("bad group name %q: %s", wire.Clip(group), queengate.NameRule)
	}
	return nil
}

// movesEnvelope bounds what a create or seek answer takes beside its
// changes: the names, the totals and the field names.
const movesEnvelope = 1024

// groupMoves totals moves and lists the partitions that changed (moved,
// clamped or a lease ended) as fit in room bytes.
func groupMoves(moves []model.GroupMove, room int64) queengate.GroupMoves {
	out := queengate.GroupMoves{Partitions: len(moves), Changes: []queengate.GroupMoveView{}}
	for _, m := range moves {
		if m.From != m.To {
			out.Moved++
		}
		if m.Clamped {
			out.Clamped++
		}
		if m.LeaseEnded {
			out.LeasesEnded++
		}
		if m.From != m.To || m.Clamped || m.LeaseEnded {
			out.Changes = append(out.Changes, queengate.GroupMoveView{Partition: m.Partition, From: m.From, To: m.To,
				Clamped: m.Clamped, LeaseEnded: m.LeaseEnded})
		}
	}
	n, _ := wire.Fitting(out.Changes, int(max(room, 0)))
	if n < len(out.Changes) {
		out.Changes, out.Truncated = out.Changes[:n], true
	}
	return out
}

// decodeGroupCreate reads a group create's optional body: at most one of
// "start", "offsets" and "time"; none is the earliest.
func decodeGroupCreate(body []byte) (model.GroupStart, *queengate.Error) {
	start := model.GroupStart{From: model.StartEarliest}
	if wire.Blank(body) {
		return start, nil
	}
	var given []string
	werr := wire.DecodeObject(body, wire.TheBody, groupCreateShape,
		wire.Field{Name: "start", Decode: func(raw []byte) *queengate.Error {
			s, _ := wire.DecodeString(raw)
			if s != model.StartEarliest && s != model.StartLatest {
				return wire.BadInput(`"start" must be "earliest" or "latest", not %s (a start at offsets or at a time is "offsets" or "time")`, wire.Describe(raw))
			}
			start.From, given = s, append(given, "start")
			return nil
		}},
		wire.Field{Name: "offsets", Decode: func(raw []byte) *queengate.Error {
			start.From, given = model.StartOffsets, append(given, "offsets")
			return offsetsInto(raw, &start.Offsets)
		}},
		wire.Field{Name: "time", Decode: func(raw []byte) *queengate.Error {
			t, werr := gateway.ParseTime("time", raw)
			start.From, start.Time, given = model.StartTime, t, append(given, "time")
			return werr
		}},
	)
	if werr == nil && len(given) > 1 {
		werr = wire.BadInput("give one of \"start\", \"offsets\" and \"time\", not %s: want %s", wire.JoinAnd(wire.QuoteAll(given)), groupCreateShape.Example)
	}
	return start, werr
}

// offsetsInto decodes "offsets": an object of partition names to next
// offsets, at least one.
func offsetsInto(raw []byte, dst *map[string]int64) *queengate.Error {
	members, err := wire.ScanObject(raw, func() string { return `"offsets"` })
	if err != nil {
		return wire.BadInput(`%v: want an object of partition names to offsets, such as {"p0": 42}`, err)
	}
	if len(members) == 0 {
		return wire.BadInput(`"offsets" is empty: name at least one partition, such as {"p0": 42}`)
	}
	out := make(map[string]int64, len(members))
	for i, m := range members {
		p := string(m.Key)
		switch {
		case !queengate.ValidName(p):
			return wire.BadInput(`"offsets": %q is not a partition name (%s)`, wire.Clip(p), queengate.NameRule)
		case slices.ContainsFunc(members[:i], func(o wire.Member) bool { return string(o.Key) == p }):
			return wire.BadInput(`"offsets": partition %q is given twice: send it once`, p)
		}
		var off int64
		if werr := wire.WholeNumberInto(`offsets: `+p, 0, math.MaxInt64, &off)(m.Raw); werr != nil {
			return werr
		}
		out[p] = off
	}
	*dst = out
	return nil
}

// decodeSeek reads a seek's body: "offset" or "time", and optionally
// "partition".
func decodeSeek(body []byte) (model.Seek, *queengate.Error) {
	var (
		seek   model.Seek
		offset = int64(-1)
		at     time.Time
		timed  bool
	)
	werr := wire.DecodeObject(body, wire.TheBody, groupSeekShape,
		wire.Field{Name: "partition", Decode: wire.NameInto("partition", &seek.Partition)},
		wire.Field{Name: "offset", Decode: wire.WholeNumberInto("offset", 0, math.MaxInt64, &offset)},
		wire.Field{Name: "time", Decode: func(raw []byte) (werr *queengate.Error) {
			at, werr = gateway.ParseTime("time", raw)
			timed = true
			return werr
		}},
	)
	switch {
	case werr != nil:
		return seek, werr
	case offset >= 0 && timed:
		return seek, wire.BadInput(`give "offset" or "time", not both: want %s`, groupSeekShape.Example)
	case offset < 0 && !timed:
		return seek, wire.BadInput(`"offset" or "time" is missing: want %s`, groupSeekShape.Example)
	case timed && at.IsZero():
		at = time.Unix(0, 0) // year 1 (a zero Time means "by offset") is before every message, as the epoch is
	}
	seek.Offset, seek.Time = offset, at
	return seek, nil
}
