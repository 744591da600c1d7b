package pgtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DB is what the frame helpers need of a pool, a connection or a
// transaction.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// AgeFrames moves the creation time of the frames matching where (a
// condition on log_segments and log_txns columns, over args) back by age,
// wherever a frame's time is kept: beside its data in log_segments, and
// in log_txns for a frame whose hashes moved there. It is how a test puts
// frames past a window or a retention without waiting.
func AgeFrames(tb testing.TB, db DB, age time.Duration, where string, args ...any) {
	tb.Helper()
	for _, table := range []string{"log_segments", "log_txns"} {
		sql := fmt.Sprintf("UPDATE queen.%s SET created_at = created_at - make_interval(secs => $%d) WHERE %s",
			table, len(args)+1, where)
		if _, err := db.Exec(context.Background(), sql, append(args, age.Seconds())...); err != nil {
			tb.Fatalf("age frames: %v", err)
		}
	}
}

// HashFrames counts partition pid's frames whose transactionId hashes the
// store still reads (queen.log_hashes from txns_start on): what a probe,
// a hydration and an ack by transactionId can find.
func HashFrames(tb testing.TB, db DB, pid int64) int {
	tb.Helper()
	var n int
	err := db.QueryRow(context.Background(), `
		SELECT count(*) FROM queen.log_partitions p
		 CROSS JOIN LATERAL queen.log_hashes(p.id, -1, p.txns_start, p.txns_end) AS h
		 WHERE p.id = $1`, pid).Scan(&n)
	if err != nil {
		tb.Fatalf("hash frames: %v", err)
	}
	return n
}
