package tail

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/queengate/queengate/model"
)

// Cycler runs a cycle served from the tail: the store's one statement.
type Cycler interface {
	TailCycle(ctx context.Context, c model.TailCycle) (lease model.TailLease, popped, ok bool, err error)
}

// Checker reads what SQL holds for a cycle the tail served (check mode):
// the store's TailSlice.
type Checker interface {
	TailSlice(ctx context.Context, pid, from, to, lo, hi, budget int64, items []model.Settlement) (
		msgs []model.LogMessage, whole, ok bool, err error)
}

// Server serves the usual consume cycle from a tail and the leases it
// remembers (docs/design.md, "The tail").
type Server struct {
	Tail   *Tail
	Leases *Leases
	Store  Cycler
	// Check, when set (tests), reads every served cycle's messages back
	// from SQL and fails the cycle on any difference.
	Check      Checker
	mismatches atomic.Int64
}

// ErrMismatch is a served cycle that SQL would have answered otherwise
// (check mode only).
var ErrMismatch = fmt.Errorf("tail: a cycle served from memory differs from what SQL holds")

// Remember keeps what group groupID's pop delivered under its lease, when
// its messages are one run of offsets: a later ack of the whole of them
// may then be served from the tail.
func (s *Server) Remember(groupID int64, r *model.PopResult) {
	if s == nil || r.LeaseID == "" || len(r.Messages) == 0 {
		return
	}
	from, to := r.Messages[0].Offset, r.Messages[len(r.Messages)-1].Offset
	if to-from+1 != int64(len(r.Messages)) {
		return
	}
	txns := make([]string, len(r.Messages))
	for i := range r.Messages {
		if r.Messages[i].Offset != from+int64(i) {
			return
		}
		txns[i] = r.Messages[i].TxnID
	}
	s.Leases.Remember(&Lease{GroupID: groupID, PartitionID: r.PartitionID, ID: r.LeaseID, From: from, To: to, TxnIDs: txns,
		Epoch: s.Tail.Epoch()}, r.LeaseUntil)
}

// Forget forgets a lease settled, released or taken back otherwise.
func (s *Server) Forget(leaseID string) {
	if s != nil {
		s.Leases.Forget(leaseID)
	}
}

// Renewed moves a remembered lease's end.
func (s *Server) Renewed(leaseID string, until time.Time) {
	if s != nil {
		s.Leases.Renewed(leaseID, until)
	}
}

// Mismatches counts the served cycles check mode found wrong.
func (s *Server) Mismatches() int64 { return s.mismatches.Load() }

// Cycle serves pop r carrying the ack of items under lease leaseID of
// partition pid, from the tail, when the ack completes the whole lease
// as remembered and the tail holds what the pop delivers next: the ack's
// result and the pop's delivery, ok true; pop nil when the statement
// settled the ack alone (the pop is then the caller's to make, the usual
// way). ok false: nothing was changed, and the caller takes the usual
// path. r's Room must already leave room
// for the ack's answer.
func (s *Server) Cycle(ctx context.Context, r model.PopQuery, pid int64, leaseID string, items []model.Settlement) (
	ack model.SettledBatch, pop *model.PopResult, ok bool, err error) {
	c, slice, planned := s.plan(r, pid, leaseID, items)
	if !planned {
		s.Tail.Missed()
		return ack, nil, false, nil
	}
	lease, popped, ok, err := s.Store.TailCycle(ctx, c)
	if err != nil {
		return ack, nil, false, err
	}
	if !ok {
		s.Tail.Refused()
		return ack, nil, false, nil
	}
	ack = model.SettledBatch{Items: make([]model.AckOutcome, len(items)), NextOffset: c.To + 1, LeaseEnded: true}
	for i := range items {
		ack.Items[i] = model.AckOutcome{Offset: c.From + int64(i), Result: model.AckAcked}
	}
	if popped {
		pop = &model.PopResult{PartitionID: pid, Partition: lease.Partition, LeaseID: lease.LeaseID, LeaseUntil: lease.LeaseUntil,
			Messages: slice.Deliveries(pid)}
	}
	if s.Check != nil {
		if err := s.check(ctx, c, items, pop); err != nil {
			s.mismatches.Add(1)
			return ack, nil, false, err
		}
	}
	if popped {
		s.Tail.Served()
	} else {
		s.Tail.Acked()
	}
	return ack, pop, true, nil
}

// plan is the cycle to send, and the messages it delivers, when the
// lease is remembered, the ack completes it whole and the tail holds
// the next messages as consumer_pop_slice would read them.
func (s *Server) plan(r model.PopQuery, pid int64, leaseID string, items []model.Settlement) (model.TailCycle, Slice, bool) {
	l, live := s.Leases.Take(leaseID)
	if !live || l.PartitionID != pid || l.GroupID != r.Group.ID || r.MaxAckPending > 0 || !WholeLease(l, items) {
		return model.TailCycle{}, Slice{}, false
	}
	a, b, more, n, held := s.Tail.window(pid, l.To+1)
	if !held || n != l.Epoch {
		return model.TailCycle{}, Slice{}, false
	}
	slice, fits := NextSlice(a, b, more, l.To+1, r.Max, model.SliceBudget(r), model.DeliveryEnvelope)
	if !fits {
		return model.TailCycle{}, Slice{}, false
	}
	return model.TailCycle{Pop: r, PartitionID: pid, LeaseID: leaseID, From: l.From, To: l.To, Hi: slice.Hi, Epoch: n},
		slice, true
}

// check reads the cycle's ack decision and messages back from SQL.
func (s *Server) check(ctx context.Context, c model.TailCycle, items []model.Settlement, pop *model.PopResult) error {
	msgs, whole, ok, err := s.Check.TailSlice(ctx, c.PartitionID, c.From, c.To, c.To+1, c.Hi, model.SliceBudget(c.Pop), items)
	if err != nil {
		return fmt.Errorf("tail check: %w", err)
	}
	if pop == nil { // the ack alone
		if !whole {
			return fmt.Errorf("%w: partition %d lease %d..%d: SQL says the ack is not the whole lease", ErrMismatch, c.PartitionID, c.From, c.To)
		}
		return nil
	}
	if !ok || !whole || len(msgs) != len(pop.Messages) {
		return fmt.Errorf("%w: partition %d lease %d..%d next %d..%d: SQL slice found %v, whole lease %v, %d messages, tail %d",
			ErrMismatch, c.PartitionID, c.From, c.To, c.To+1, c.Hi, ok, whole, len(msgs), len(pop.Messages))
	}
	for i, m := range msgs {
		d := pop.Messages[i].LogMessage
		if m.Offset != d.Offset || m.TxnID != d.TxnID || !slices.Equal(m.Data, d.Data) || !slices.Equal(m.Meta, d.Meta) ||
			!m.CreatedAt.Equal(d.CreatedAt) {
			return fmt.Errorf("%w: partition %d offset %d: SQL %q %s %s, tail %d %q %s %s", ErrMismatch, c.PartitionID, m.Offset,
				m.TxnID, m.Data, m.CreatedAt.Format(time.RFC3339Nano), d.Offset, d.TxnID, d.Data, d.CreatedAt.Format(time.RFC3339Nano))
		}
	}
	return nil
}
