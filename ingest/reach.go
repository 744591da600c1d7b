package ingest

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/queengate/queengate/model"
)

// reachability is what the ingester knows of PostgreSQL's reach. While it
// is down, Submit refuses pushes and the bundles in flight are cancelled,
// so that producers get a fast answer instead of waiting out the push
// timeout against a stalled server.
type reachability struct {
	lastCommit atomic.Int64 // unix nanoseconds of the last push PostgreSQL answered

	mu sync.Mutex
	// ctx is what bundles are sent under; it is cancelled (cause
	// model.ErrStoreDown) when PostgreSQL goes away, and replaced when it
	// is back: PostgreSQL is down exactly while ctx is done.
	ctx    context.Context
	cancel context.CancelCauseFunc
}

func (r *reachability) init() { r.ctx, r.cancel = context.WithCancelCause(context.Background()) }

func (r *reachability) down() bool { return r.current().Err() != nil }

// current is the context bundles are sent under now.
func (r *reachability) current() context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ctx
}

func (r *reachability) set(reachable bool) (changed bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if wasUp := r.ctx.Err() == nil; wasUp == reachable {
		return false
	}
	if reachable {
		r.ctx, r.cancel = context.WithCancelCause(context.Background())
	} else {
		r.cancel(model.ErrStoreDown)
	}
	return true
}

// SetStoreReachable tells the ingester whether PostgreSQL answers (an
// internal/storewatch Watch does). Going down refuses new pushes
// (ErrStoreDown) and fails what is buffered or in flight at once:
// buffered messages as not stored, a push already sent as settled or of
// unknown outcome.
func (in *Ingester) SetStoreReachable(reachable bool) {
	if in.reach.set(reachable) {
		in.log.Warn().Bool("reachable", reachable).Msg("PostgreSQL reachability changed")
	}
}

// LastCommit is when PostgreSQL last answered a push of this ingester
// (zero before the first).
func (in *Ingester) LastCommit() time.Time {
	if ns := in.reach.lastCommit.Load(); ns > 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}
