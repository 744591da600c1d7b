package consume

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/queengate/queengate/internal/startstop"
	"github.com/queengate/queengate/model"
)

// Group activity (docs/protocol.md, "Idle groups and retention"). A group
// is idle while nothing of it is heard: no pop (one that delivers nothing
// counts, and a long poll counts all the while it waits), ack, renewal or
// release. A pop that delivers nothing writes nothing to PostgreSQL, and
// must not start to (idle long polls stay cheap): the gateway notes each
// group's latest activity in memory, and its ActivityFlusher writes what
// it noted, for every group heard from, in one statement a tick.

// flushEvery is how often a gateway writes the activity it noted: a
// quarter of the shortest groupIdleSeconds (1), so a group heard from
// without pause is never found idle, and its idleMs stays below it.
const flushEvery = 250 * time.Millisecond

// activity is what a gateway noted of its groups since its last write.
type activity struct {
	mu      sync.Mutex
	noted   map[int64]time.Time // each group's latest activity not yet taken
	waiting map[int64]int       // long polls waiting, per group
}

func newActivity() *activity {
	return &activity{noted: map[int64]time.Time{}, waiting: map[int64]int{}}
}

// note records activity of group now.
func (a *activity) note(group int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.noted[group] = time.Now()
}

// wait records a long poll of group beginning: the group is active until
// the returned function is called, when it ends.
func (a *activity) wait(group int64) (end func()) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.waiting[group]++
	return func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		if a.waiting[group]--; a.waiting[group] == 0 {
			delete(a.waiting, group)
		}
		a.noted[group] = time.Now()
	}
}

// take empties what was noted: each group's latest activity, as long
// before now; a group with a long poll waiting is active now. In group
// order.
func (a *activity) take(now time.Time) []model.GroupNoted {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]model.GroupNoted, 0, len(a.noted)+len(a.waiting))
	for g, at := range a.noted {
		if a.waiting[g] == 0 {
			out = append(out, model.GroupNoted{GroupID: g, Ago: now.Sub(at)})
		}
	}
	for g := range a.waiting {
		out = append(out, model.GroupNoted{GroupID: g})
	}
	clear(a.noted)
	slices.SortFunc(out, func(x, y model.GroupNoted) int { return cmp.Compare(x.GroupID, y.GroupID) })
	return out
}

// putBack notes again what take answered at now and could not be
// written, unless something later was noted since.
func (a *activity) putBack(notes []model.GroupNoted, now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, n := range notes {
		if at := now.Add(-n.Ago); at.After(a.noted[n.GroupID]) {
			a.noted[n.GroupID] = at
		}
	}
}

// ActivityFlusher writes the activity its Consumers noted to the store
// (Store.NoteActive), every flushEvery and once more when it stops: one
// statement a tick for all the groups heard from, none when nothing was.
// Several gateways write the same groups; a write never moves a group's
// activity back.
type ActivityFlusher struct {
	startstop.Base
	c       *Consumers
	every   time.Duration
	log     zerolog.Logger
	ticks   atomic.Int64 // flushes done, writing or not
	failing bool         // the last write failed (logged once until one works)
}

// ActivityFlusher builds the flusher of c's noted activity; it runs from
// Start to Stop.
func (c *Consumers) ActivityFlusher(log zerolog.Logger) *ActivityFlusher {
	return &ActivityFlusher{c: c, every: flushEvery, log: log}
}

// Start writes the noted activity every tick until Stop (or until ctx
// ends).
func (f *ActivityFlusher) Start(ctx context.Context) error {
	run, done, err := f.StartInit(ctx)
	if err != nil {
		return err
	}
	go func() {
		defer done()
		f.loop(run)
	}()
	return nil
}

func (f *ActivityFlusher) loop(ctx context.Context) {
	t := time.NewTicker(f.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			// What was noted since the last tick is written too (the
			// store closes after the services stop), briefly: a store out
			// of reach does not hold the stop up.
			last, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			f.flush(last)
			cancel()
			return
		case <-t.C:
			f.flush(ctx)
		}
	}
}

// flush writes what was noted since the last flush; what a failed write
// did not write, or a write skipped, is noted again for the next.
func (f *ActivityFlusher) flush(ctx context.Context) {
	defer f.ticks.Add(1)
	now := time.Now()
	notes := f.c.activity.take(now)
	if len(notes) == 0 {
		return
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	skipped, err := f.c.store.NoteActive(wctx, notes)
	if err != nil {
		f.c.activity.putBack(notes, now)
		if ctx.Err() == nil && !f.failing {
			f.log.Warn().Err(err).Msg("writing the consumer groups' activity failed; retrying every tick")
			f.failing = true
		}
		return
	}
	if len(skipped) > 0 { // rows other transactions held: for the next tick
		f.c.activity.putBack(slices.DeleteFunc(notes, func(n model.GroupNoted) bool { return !slices.Contains(skipped, n.GroupID) }), now)
	}
	if f.failing {
		f.log.Info().Msg("writing the consumer groups' activity works again")
		f.failing = false
	}
}
