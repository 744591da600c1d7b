package pgstore_test

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/queengate/queengate/internal/pgtest"
)

// TestTheTablesRefuseExactlyTheNamesTheRuleRefuses: the CHECK constraints
// on queue, partition and group names (a length test and a character
// class, cheap on every update of the row) accept exactly the names of
// the documented rule, 1 to 128 of [A-Za-z0-9_-], and so does
// ensure_partitions, which creates only valid names.
func TestTheTablesRefuseExactlyTheNamesTheRuleRefuses(t *testing.T) {
	t.Parallel()
	rule := regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)
	names := []string{"", "a", "Z", "0", "_", "-", "order-42_B", strings.Repeat("x", 128), strings.Repeat("x", 129),
		"a b", "a.b", "a*", "a>", "a\n", "\na", "é", "aé", "ß", "a\x00b", "a/b", "[a]", "a^", "a$", "a\\b",
		strings.Repeat("é", 64), strings.Repeat("-", 128)}
	st := pgtest.Store(t, pgtest.NewDB(t))
	ctx := context.Background()
	var queueID int64
	if err := st.Pool().QueryRow(ctx, `INSERT INTO queen.queues (name) VALUES ('names') RETURNING id`).Scan(&queueID); err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{
		`INSERT INTO queen.queues (name) SELECT $2::text WHERE $1::bigint IS NOT NULL`,
		`INSERT INTO queen.log_partitions (queue_id, name) VALUES ($1, $2)`,
		`INSERT INTO queen.consumer_groups (queue_id, name) VALUES ($1, $2)`,
	} {
		for _, name := range names {
			if strings.ContainsRune(name, 0) {
				continue // text cannot hold it: refused before any check
			}
			err := pgx.BeginFunc(ctx, st.Pool(), func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, stmt, queueID, name); err != nil {
					return err
				}
				return errors.New("rolled back")
			})
			var pgErr *pgconn.PgError
			refused := errors.As(err, &pgErr) && pgErr.Code == "23514"
			if refused == rule.MatchString(name) {
				t.Errorf("%s with %q: refused %v (%v), want refused %v", stmt, name, refused, err, !rule.MatchString(name))
			}
		}
	}
	if _, err := st.EnsurePartition(ctx, "names", strings.Repeat("p", 128)); err != nil {
		t.Errorf("ensure a 128-byte partition name: %v", err)
	}
	if _, err := st.EnsurePartition(ctx, "names", "bad name"); err == nil {
		t.Error("ensure a partition named \"bad name\": created, want refused")
	}
}
