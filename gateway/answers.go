package gateway

import (
	"strings"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/internal/wire"
	"github.com/queengate/queengate/model"
)

// Answers every endpoint set gives alike: names checked, store failures
// mapped to codes.

// ValidPlace refuses a bad queue or partition name.
func ValidPlace(queue, partition string) *queengate.Error {
	if werr := ValidQueue(queue); werr != nil {
		return werr
	}
	if !queengate.ValidName(partition) {
		return wire.BadInput("bad partition name %q: %s", wire.Clip(partition), queengate.NameRule)
	}
	return nil
}

// ValidQueue refuses a bad queue name, quoting at most 128 bytes of it.
func ValidQueue(queue string) *queengate.Error {
	if !queengate.ValidName(queue) {
		return wire.BadInput("bad queue name %q: %s", wire.Clip(queue), queengate.NameRule)
	}
	return nil
}

// NotFound is a 404 saying a store's not-found error once: lead, then
// what the store wrapped around the sentinel (whose own words before it
// would repeat what follows: "not found: partition x does not exist").
// A detail that says so itself ("… does not exist") goes without lead:
// not "unknown partition x does not exist".
func NotFound(err, sentinel error, lead string) *queengate.Error {
	detail, _ := strings.CutPrefix(err.Error(), sentinel.Error()+": ")
	if strings.HasSuffix(detail, " does not exist") {
		lead = ""
	}
	return &queengate.Error{Code: queengate.CodeNotFound, Text: lead + detail}
}

// StoreError maps a store failure: PostgreSQL out of reach is a 503
// (retry), the rest a 500. Neither answer carries the driver's text, which
// may name the server's address: the detail goes to the log.
func StoreError(err error) *queengate.Error {
	werr := &queengate.Error{Code: queengate.CodeInternal, Text: "the store failed; the gateway's log has the detail"}
	if model.Unreachable(err) {
		werr = &queengate.Error{Code: queengate.CodeUnavailable, Text: "PostgreSQL is unavailable; retry later"}
	}
	storeLog.Load().Warn().Err(err).Int("code", werr.Code).Msg("store failure answered")
	return werr
}

// StoreLog is where StoreError logs: the last gateway's log.
func StoreLog() *zerolog.Logger { return storeLog.Load() }

// storeLog is where StoreError logs, the last gateway's log (one process
// runs one gateway; tests' gateways all log to their test).
var storeLog atomic.Pointer[zerolog.Logger]

// init points storeLog at a logger that drops, until a gateway is built.
func init() {
	nop := zerolog.Nop()
	storeLog.Store(&nop)
}

// ParseTime reads field name's time: an RFC 3339 string with a zone.
func ParseTime(name string, raw []byte) (time.Time, *queengate.Error) {
	s, ok := wire.DecodeString(raw)
	if !ok {
		return time.Time{}, wire.BadInput(`%q must be an RFC 3339 string such as "2026-12-01T09:00:00Z", not %s`, name, wire.Describe(raw))
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, wire.BadInput(`%q %q is not RFC 3339 with a zone, such as "2026-12-01T09:00:00Z"`, name, wire.Clip(s))
	}
	return t, nil
}

// MaxPopBytes bounds a pop's maxBytes, and a read's: one range for both.
const MaxPopBytes = 1 << 30

// GroupViews groups per-partition positions by group (they come sorted
// by group), each with its activity.
func GroupViews(gps []model.GroupPartition, activity []model.GroupActivity) []queengate.GroupView {
	byName := make(map[string]model.GroupActivity, len(activity))
	for _, a := range activity {
		byName[a.Group] = a
	}
	out := []queengate.GroupView{}
	for _, gp := range gps {
		if len(out) == 0 || out[len(out)-1].Group != gp.Group {
			a := byName[gp.Group]
			out = append(out, queengate.GroupView{Group: gp.Group, IdleMs: a.IdleFor.Milliseconds(), HoldsRetention: !a.NotHolds})
		}
		v := &out[len(out)-1]
		p := queengate.GroupPartitionView{Partition: gp.Partition, PartitionID: gp.PartitionID, NextOffset: gp.NextOffset,
			LastOffset: gp.LastOffset, Lag: gp.Lag(), LeaseConsumer: gp.LeaseConsumer, Unconfirmed: gp.Unconfirmed,
			DeletedUnconsumed: gp.DeletedUnconsumed}
		if gp.Leased {
			until := gp.LeaseUntil.UTC()
			p.LeaseUntil = &until
		}
		if !gp.DelayedUntil.IsZero() {
			until := gp.DelayedUntil.UTC()
			p.DelayedUntil = &until
			v.DelayedPartitions++
		}
		v.Partitions = append(v.Partitions, p)
		v.Lag += p.Lag
		v.PartitionCount++
		v.Unconfirmed += p.Unconfirmed
		v.DeletedUnconsumed += p.DeletedUnconsumed
	}
	return out
}
