package main

import (
	"bytes"
	"slices"

	"github.com/zeebo/xxh3"

	"github.com/queengate/queengate/internal/bench"
	"github.com/queengate/queengate/model"
)

// exactness records answers per (partition, transactionId) to check the
// run's exactness: every distinct id answered not-failed must be queued
// exactly once. Each answer is appended as a 128-bit hash of (queue,
// partition, id) and sorted only for the verdict, after the measured run:
// a map of every id cost the load generator more CPU (hashing, growth, the
// GC scanning it) than the gateway it measures spent.
type exactness struct {
	answers []answerRec
	buf     []byte // the key being hashed, reused
}

type answerRec struct {
	key    [16]byte
	queued bool // else duplicate
}

func newExactness() *exactness { return &exactness{} }

// key is the scope of deduplication: one partition of one queue.
func (e *exactness) key(b *bench.Batch, i int) [16]byte {
	e.buf = append(append(append(append(append(e.buf[:0], b.Queue...), 0x1f), b.Partition...), 0x1f), b.IDs[i]...)
	return xxh3.Hash128(e.buf).Bytes()
}

func (e *exactness) record(b *bench.Batch, statuses []model.Status) {
	for i, s := range statuses {
		if s != model.StatusFailed {
			e.answers = append(e.answers, answerRec{key: e.key(b, i), queued: s == model.StatusQueued})
		}
	}
}

// merge adds another producer's answers.
func (e *exactness) merge(o *exactness) { e.answers = append(e.answers, o.answers...) }

// byID calls f with each distinct id's number of queued answers.
func (e *exactness) byID(f func(queued int64)) {
	slices.SortFunc(e.answers, func(a, b answerRec) int { return bytes.Compare(a.key[:], b.key[:]) })
	for i := 0; i < len(e.answers); {
		j, queued := i, int64(0)
		for ; j < len(e.answers) && e.answers[j].key == e.answers[i].key; j++ {
			if e.answers[j].queued {
				queued++
			}
		}
		f(queued)
		i = j
	}
}

// distinct is the number of distinct ids answered.
func (e *exactness) distinct() int64 {
	n, _ := e.queuedTwice()
	return n
}

// queuedTwice returns the distinct ids answered and how many times ids
// were answered queued beyond their first.
func (e *exactness) queuedTwice() (distinct, extra int64) {
	e.byID(func(queued int64) {
		distinct++
		extra += max(queued-1, 0)
	})
	return distinct, extra
}

// verdict returns the distinct ids answered and the violations: ids queued
// more than once, plus ids answered only as duplicates (a duplicate of
// something never stored).
func (e *exactness) verdict() (distinct, violations int64) {
	e.byID(func(queued int64) {
		distinct++
		switch {
		case queued > 1:
			violations += queued - 1
		case queued == 0:
			violations++
		}
	})
	return distinct, violations
}
