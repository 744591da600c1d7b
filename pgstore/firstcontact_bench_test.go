package pgstore_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/queengate/queengate/internal/pgtest"
)

// BenchmarkFirstContactAtScale is one bundle's first contact with 1000
// partitions, among 1k to 1M partitions of the same queue: resolving 1000
// that exist (a memo refresh, or a gateway meeting them), creating 1000
// new ones, and hydrating 1000. Each lookup is one index probe, so the
// time per op should not grow with the table (nor once the session's
// plans turn generic, after five calls).
func BenchmarkFirstContactAtScale(b *testing.B) {
	st := pgtest.Store(b, pgtest.NewDB(b))
	ctx := context.Background()
	if _, _, err := st.EnsurePartitions(ctx, []string{"big"}, []string{"seed"}); err != nil {
		b.Fatal(err)
	}
	total, created := 0, 0
	for _, size := range []int{1000, 10_000, 100_000, 1_000_000} {
		if _, err := st.Pool().Exec(ctx, `INSERT INTO queen.log_partitions (queue_id, name)
			SELECT q.id, 'g' || g FROM queen.queues q, generate_series($1::int, $2::int - 1) AS g WHERE q.name = 'big'`,
			total, size); err != nil {
			b.Fatal(err)
		}
		total = size
		if _, err := st.Pool().Exec(ctx, "ANALYZE queen.log_partitions"); err != nil {
			b.Fatal(err)
		}
		names := func(name func(i int) string) (queues, parts []string) {
			for i := range 1000 {
				queues, parts = append(queues, "big"), append(parts, name(i))
			}
			return queues, parts
		}
		round := 0
		existing := func(i int) string { return fmt.Sprint("g", (i*7919+round*104729)%size) }
		b.Run(fmt.Sprintf("partitions=%d/resolve-existing", size), func(b *testing.B) {
			for b.Loop() {
				round++
				queues, parts := names(existing)
				if _, _, err := st.EnsurePartitions(ctx, queues, parts); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("partitions=%d/create", size), func(b *testing.B) {
			for b.Loop() {
				created++
				queues, parts := names(func(i int) string { return fmt.Sprint("n", created, "-", i) })
				if _, _, err := st.EnsurePartitions(ctx, queues, parts); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("partitions=%d/hydrate", size), func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				round++
				queues, keys := names(existing)
				parts, _, err := st.EnsurePartitions(ctx, queues, keys)
				if err != nil {
					b.Fatal(err)
				}
				pids := make([]int64, len(parts))
				for i, p := range parts {
					pids[i] = p.ID
				}
				b.StartTimer()
				if _, err := st.HydrateMany(ctx, pids); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
