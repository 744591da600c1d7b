package pgstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// DurabilityLevel says what a commit's acknowledgement means: where the
// commit is when PostgreSQL answers it.
type DurabilityLevel string

// The levels, from weakest to strongest (docs/operations.md, "What an
// acknowledgement means").
const (
	// DurabilityNone: acknowledged commits can be lost to a crash of the
	// server (synchronous_commit = off, or fsync = off).
	DurabilityNone DurabilityLevel = "none"
	// DurabilityLocalDisk: flushed to this server's disk only.
	DurabilityLocalDisk DurabilityLevel = "local-disk"
	// DurabilityStandbyWritten: flushed here and written by the
	// synchronous standbys to their operating system, not yet to their
	// disks (synchronous_commit = remote_write).
	DurabilityStandbyWritten DurabilityLevel = "standby-written"
	// DurabilityStandbyDisk: flushed here and on the synchronous
	// standbys' disks (synchronous_commit = on).
	DurabilityStandbyDisk DurabilityLevel = "standby-disk"
	// DurabilityStandbyApplied: as standby-disk, and replayed, so reads on
	// those standbys see it (synchronous_commit = remote_apply).
	DurabilityStandbyApplied DurabilityLevel = "standby-applied"
)

// DurabilityLevels lists every level, weakest first.
var DurabilityLevels = []DurabilityLevel{DurabilityNone, DurabilityLocalDisk,
	DurabilityStandbyWritten, DurabilityStandbyDisk, DurabilityStandbyApplied}

// Durability is what the pool's sessions commit with, read from the
// server: the settings that decide what an acknowledgement means, and the
// standbys streaming from it.
type Durability struct {
	SynchronousCommit       string // on, off, local, remote_write, remote_apply
	Fsync                   bool
	FullPageWrites          bool
	SynchronousStandbyNames string
	InRecovery              bool
	// Standbys are the standbys streaming from the server; nil when the
	// role may not see their state (pg_monitor or superuser needed).
	Standbys []Standby
}

// Standby is a standby streaming from the server.
type Standby struct {
	Name string // its application_name
	// SyncState is pg_stat_replication's: sync, quorum, potential or
	// async.
	SyncState string
}

// Durability reads, on one of the pool's sessions (a URL's or a role's
// settings apply to them), what a commit's acknowledgement means.
func (s *Store) Durability(ctx context.Context) (Durability, error) {
	var d Durability
	var fsync, fullPageWrites string
	err := s.pool.QueryRow(ctx, `SELECT current_setting('synchronous_commit'), current_setting('fsync'),
		current_setting('full_page_writes'), current_setting('synchronous_standby_names'), pg_is_in_recovery()`).
		Scan(&d.SynchronousCommit, &fsync, &fullPageWrites, &d.SynchronousStandbyNames, &d.InRecovery)
	if err != nil {
		return Durability{}, fmt.Errorf("pgstore: read durability settings: %w", err)
	}
	d.Fsync, d.FullPageWrites = fsync == "on", fullPageWrites == "on"
	// Without pg_read_all_stats the rows are there but their state is
	// NULL: the standbys are then unknown rather than absent.
	rows, err := s.pool.Query(ctx, `SELECT coalesce(application_name, ''), sync_state FROM pg_stat_replication
		WHERE state IS DISTINCT FROM 'backup' ORDER BY application_name`)
	if err != nil {
		return Durability{}, fmt.Errorf("pgstore: read standbys: %w", err)
	}
	type row struct {
		Name      string
		SyncState *string
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row])
	if err != nil {
		return Durability{}, fmt.Errorf("pgstore: read standbys: %w", err)
	}
	d.Standbys = []Standby{}
	for _, r := range got {
		if r.SyncState == nil {
			d.Standbys = nil
			break
		}
		d.Standbys = append(d.Standbys, Standby{Name: r.Name, SyncState: *r.SyncState})
	}
	return d, nil
}

// Level is what an acknowledged commit survives. With synchronous
// standbys named and a synchronous_commit that waits for them, a commit
// returns once they confirm it. While too few stream, commits wait
// (CommitsWait), and the level is local-disk: a push that times out
// waiting is settled (outcome.go) by terminating its backend, and
// PostgreSQL then keeps the commit on this server only, which the
// settling answers duplicate.
func (d Durability) Level() DurabilityLevel {
	if !d.Fsync {
		return DurabilityNone
	}
	if wait, _ := d.CommitsWait(); wait {
		return DurabilityLocalDisk
	}
	if !d.waitsForStandbys() {
		if d.SynchronousCommit == "off" {
			return DurabilityNone
		}
		return DurabilityLocalDisk
	}
	switch d.SynchronousCommit {
	case "remote_apply":
		return DurabilityStandbyApplied
	case "remote_write":
		return DurabilityStandbyWritten
	default:
		return DurabilityStandbyDisk
	}
}

// waitsForStandbys says whether commits wait for synchronous standbys:
// some are named and synchronous_commit asks for more than the local
// flush.
func (d Durability) waitsForStandbys() bool {
	switch d.SynchronousCommit {
	case "on", "remote_write", "remote_apply":
		return strings.TrimSpace(d.SynchronousStandbyNames) != ""
	}
	return false
}

// CommitsWait says whether commits now wait for synchronous standbys that
// are not streaming (fewer confirm than synchronous_standby_names asks
// for), so that no commit is acknowledged until enough connect. known is
// false when the standbys' state cannot be read.
func (d Durability) CommitsWait() (wait, known bool) {
	if !d.waitsForStandbys() {
		return false, true
	}
	if d.Standbys == nil {
		return false, false
	}
	confirming := 0
	for _, sb := range d.Standbys {
		if sb.SyncState == "sync" || sb.SyncState == "quorum" {
			confirming++
		}
	}
	return confirming < syncStandbysWanted(d.SynchronousStandbyNames), true
}

// syncStandbysWanted is how many standbys must confirm a commit under
// synchronous_standby_names: `[FIRST|ANY] n (names…)` asks for n, a bare
// list `a, b` for one.
func syncStandbysWanted(names string) int {
	s := strings.TrimSpace(names)
	for _, keyword := range []string{"first", "any"} {
		if len(s) > len(keyword) && strings.EqualFold(s[:len(keyword)], keyword) && (s[len(keyword)] == ' ' || s[len(keyword)] == '\t') {
			s = strings.TrimSpace(s[len(keyword):])
			break
		}
	}
	digits := strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' })
	if digits <= 0 || !strings.HasPrefix(strings.TrimSpace(s[digits:]), "(") {
		return 1 // a list of names (a name may be a number: `1, 2`)
	}
	n, err := strconv.Atoi(s[:digits])
	if err != nil || n < 1 {
		return 1
	}
	return n
}

// Warning says, in a sentence, how acknowledged messages could be lost or
// why commits wait; "" when neither.
func (d Durability) Warning() string {
	var parts []string
	switch {
	case !d.Fsync:
		parts = append(parts, "fsync is off: an acknowledged message can be lost, and the database corrupted, by a crash of the PostgreSQL server's machine")
	case d.Level() == DurabilityNone:
		parts = append(parts, "synchronous_commit is off: an acknowledged message can be lost to a crash of the PostgreSQL server")
	}
	if d.Fsync && !d.FullPageWrites {
		parts = append(parts, "full_page_writes is off: a crash of the server's machine can corrupt the database unless its file system rules out torn pages")
	}
	if wait, _ := d.CommitsWait(); wait {
		parts = append(parts, fmt.Sprintf("commits wait: synchronous_standby_names is %q but fewer synchronous standbys than it asks for are streaming; no push is answered until one connects, and a push that times out waiting is kept on this server only", d.SynchronousStandbyNames))
	}
	if d.InRecovery {
		parts = append(parts, "the server is a standby in recovery: writes fail")
	}
	return strings.Join(parts, "; ")
}
