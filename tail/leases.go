package tail

import (
	"sync"
	"time"
)

// DefaultMaxLeases bounds the leases remembered unless configured.
const DefaultMaxLeases = 65536

// Leases remembers the leases this gateway answered, by lease id, until
// they are settled, released, taken back or run out, up to a bound.
// Nothing depends on a lease being remembered: one forgotten only costs
// its ack the usual path. Safe for concurrent use.
type Leases struct {
	mu    sync.Mutex
	max   int
	byID  map[string]leaseEntry
	clock func() time.Time
	// nextSweep is when a full map may next be swept of leases run out.
	nextSweep time.Time
}

type leaseEntry struct {
	l     *Lease
	until time.Time
}

// NewLeases remembers up to max leases.
func NewLeases(max int) *Leases {
	return &Leases{max: max, byID: map[string]leaseEntry{}, clock: time.Now}
}

// Remember keeps l until until (its end). When full, the leases run out
// are forgotten (looked for at most once a second), else any one.
func (s *Leases) Remember(l *Lease, until time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.byID) >= s.max {
		if now := s.clock(); now.After(s.nextSweep) {
			s.nextSweep = now.Add(time.Second)
			for id, e := range s.byID {
				if !e.until.After(now) {
					delete(s.byID, id)
				}
			}
		}
		for id := range s.byID {
			if len(s.byID) < s.max {
				break
			}
			delete(s.byID, id)
		}
	}
	s.byID[l.ID] = leaseEntry{l: l, until: until}
}

// Take forgets lease id and returns it if it was remembered and has not
// run out.
func (s *Leases) Take(id string) (*Lease, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.byID[id]
	if !ok {
		return nil, false
	}
	delete(s.byID, id)
	return e.l, e.until.After(s.clock())
}

// Forget forgets lease id (settled, released, taken back).
func (s *Leases) Forget(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byID, id)
}

// Renewed moves lease id's end to until.
func (s *Leases) Renewed(id string, until time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.byID[id]; ok {
		e.until = until
		s.byID[id] = e
	}
}

// Clear forgets every lease (the store changed).
func (s *Leases) Clear() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.byID)
}

// Len is how many leases are remembered.
func (s *Leases) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byID)
}
