package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5"
)

// replicationRequired are the settings every node of a replicated set
// runs with, whatever the caller asks: any node may become the primary,
// and pg_rewind refuses a source without full_page_writes.
var replicationRequired = map[string]string{
	"wal_level":        "replica",
	"hot_standby":      "on",
	"full_page_writes": "on",
	// Data checksums (initdb) already let pg_rewind work; wal_log_hints
	// keeps it working for a data directory made without them.
	"wal_log_hints": "on",
}

// replicationDefaults are settings the caller may override.
var replicationDefaults = map[string]string{
	"max_wal_senders":       "10",
	"max_replication_slots": "10",
	// Kept WAL lets a standby that was down or behind catch up without a
	// slot; a slot would keep WAL for a standby that never comes back.
	"wal_keep_size": "512MB",
	// A standby retries its primary after this (default 5s): quick
	// re-attachment after a restart or a failover.
	"wal_retrieve_retry_interval": "200ms",
}

// syncManaged are set only by [Cluster.SetSync] (ALTER SYSTEM): the same
// setting on the command line would silently win over ALTER SYSTEM.
var syncManaged = []string{"synchronous_standby_names", "synchronous_commit"}

// replicationSettings is settings with the replication settings added and
// the ones SetSync manages removed.
func replicationSettings(settings map[string]string) map[string]string {
	out := maps.Clone(replicationDefaults)
	maps.Copy(out, settings)
	maps.Copy(out, replicationRequired)
	for _, name := range syncManaged {
		delete(out, name)
	}
	return out
}

// StartPrimary starts a cluster like [Start] that standbys can stream
// from: WAL for replicas, WAL kept for standbys that fall behind
// (wal_keep_size, default 512MB), data checksums and full_page_writes for
// pg_rewind, hot_standby for when it becomes a standby itself. initdb's
// pg_hba.conf already trusts replication connections from 127.0.0.1.
//
// synchronous_commit and synchronous_standby_names in opts.Settings are
// dropped: they are set with [Cluster.SetSync], because a command-line
// value would override ALTER SYSTEM. The server starts with neither
// set, so commits wait for the local flush only.
func StartPrimary(ctx context.Context, opts Options) (*Cluster, error) {
	opts.Settings = replicationSettings(opts.Settings)
	opts.DataChecksums = true
	c, err := Start(ctx, opts)
	if err != nil {
		return nil, err
	}
	// pg_rewind recovers a crashed server in single-user mode, which
	// reads the configuration files and not our command line: without
	// wal_keep_size there, its end-of-recovery checkpoint recycles the
	// WAL pg_rewind then looks for. Base backups and pg_rewind copy the
	// file to the other nodes.
	if err := c.exec(ctx, "ALTER SYSTEM SET wal_keep_size = "+quoteLiteral(opts.Settings["wal_keep_size"])); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// StandbyOptions configure a standby.
type StandbyOptions struct {
	// Dir holds the standby's data directory, socket and log, as
	// [Options].Dir; its data directory must not exist yet.
	Dir string
	// Port on 127.0.0.1; 0 picks a free port.
	Port int
	// Name is the application_name the standby streams under. Default
	// "node_<port>".
	Name string
	// Settings override the primary's settings, which the standby
	// otherwise runs with (a hot standby needs max_connections and a few
	// others at least as high as its primary's).
	Settings map[string]string
	// Sync makes the primary wait for this standby on every commit:
	// [Cluster.SetSync] with Commit and Name once the standby streams.
	Sync bool
	// Commit is synchronous_commit with Sync: "on" (default; the standby
	// has flushed the commit), "remote_apply" (it has also replayed it,
	// so queries on the standby see it) or "remote_write".
	Commit string
}

// StartStandby takes a base backup of primary into opts.Dir and starts it
// as a hot standby streaming from primary; it returns once the primary
// sees it streaming. With opts.Sync the primary then commits
// synchronously with it.
//
// The standby does not keep the synchronous_standby_names it copied from
// the primary: promoted, it commits asynchronously until SetSync names a
// standby of its own (otherwise it would wait for a server that is not
// its standby, for ever).
func StartStandby(ctx context.Context, primary *Cluster, opts StandbyOptions) (*Cluster, error) {
	settings := primary.settingsCopy()
	maps.Copy(settings, opts.Settings)
	c, err := newCluster(Options{Dir: opts.Dir, Port: opts.Port, Name: opts.Name, Settings: settings})
	if err != nil {
		return nil, err
	}
	if err := makeServerDir(c.dir, c.cred); err != nil {
		return nil, err
	}
	if _, err := os.Stat(c.dataDir()); err == nil {
		return nil, fmt.Errorf("pgcluster: standby data directory %s exists", c.dataDir())
	}
	if err := c.baseBackup(ctx, primary); err != nil {
		return nil, err
	}
	if err := c.startFollowing(ctx, primary, opts.Port == 0); err != nil {
		c.Stop()
		return nil, err
	}
	if opts.Sync {
		if err := primary.SetSync(ctx, opts.Commit, c.name); err != nil {
			c.Stop()
			return nil, err
		}
	}
	return c, nil
}

func (c *Cluster) settingsCopy() map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.settings)
}

// baseBackup copies primary's data directory into c's (which must not
// exist) with the WAL needed to start from it.
func (c *Cluster) baseBackup(ctx context.Context, primary *Cluster) error {
	// --no-sync and a fast checkpoint: a harness's standby, started at once.
	return c.runTool(ctx, "pg_basebackup", "base backup",
		"-D", c.dataDir(), "-d", primary.conninfo("postgres"),
		"--wal-method=stream", "--checkpoint=fast", "--no-sync")
}

// startFollowing starts c as a standby of primary: standby.signal, the
// primary's address in primary_conninfo (on the command line, under c's
// name), no synchronous standbys of its own. It returns once primary
// sees c streaming.
func (c *Cluster) startFollowing(ctx context.Context, primary *Cluster, pickedPort bool) error {
	if err := writeServerFile(filepath.Join(c.dataDir(), "standby.signal"), "", c.cred); err != nil {
		return err
	}
	// Appended lines win over earlier ones; ALTER SYSTEM later removes
	// the duplicates.
	reset := "# pgcluster: a standby starts without synchronous standbys of its own\nsynchronous_standby_names = ''\n"
	if err := appendFile(filepath.Join(c.dataDir(), "postgresql.auto.conf"), reset); err != nil {
		return err
	}
	c.mu.Lock()
	c.settings["primary_conninfo"] = primary.conninfo("") + " application_name=" + c.name
	c.mu.Unlock()
	if err := c.runOnFreePort(ctx, pickedPort); err != nil {
		return err
	}
	return primary.WaitStreaming(ctx, c.name)
}

// conninfo is a keyword/value connection string to the server, for the
// PostgreSQL tools and primary_conninfo; database "" names none.
func (c *Cluster) conninfo(database string) string {
	s := fmt.Sprintf("host=127.0.0.1 port=%d user=postgres sslmode=disable", c.port)
	if database != "" {
		s += " dbname=" + database
	}
	return s
}

// runTool runs one of the PostgreSQL programs as the server's user, in
// c's folder; its output goes into the error.
func (c *Cluster) runTool(ctx context.Context, tool, what string, args ...string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, tool), args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	cmd.Dir = c.dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pgcluster: %s (%s): %w: %s", what, tool, err, tail(out, 2000))
	}
	return nil
}

// writeServerFile writes a file the server's user owns.
func writeServerFile(path, content string, cred *syscall.Credential) error {
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		return err
	}
	if cred != nil {
		return os.Chown(path, int(cred.Uid), int(cred.Gid))
	}
	return nil
}

func appendFile(path, content string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(content); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// SetSync makes the server, a primary, commit synchronously with the
// named standbys: synchronous_standby_names lists them (the first one
// streaming is the synchronous one) and synchronous_commit is commit
// ("" means "on"; "remote_apply" also waits for the standby's replay).
// No standbys switches synchronous replication off (commits wait for the
// local flush only). It uses ALTER SYSTEM and a reload, and returns once
// a commit on the server waits as asked.
//
// While a named standby is down, commits wait for it: that is what
// synchronous replication means.
func (c *Cluster) SetSync(ctx context.Context, commit string, standbys ...string) error {
	if commit == "" {
		commit = "on"
	}
	quoted := make([]string, len(standbys))
	for i, name := range standbys {
		quoted[i] = pgx.Identifier{name}.Sanitize()
	}
	names := strings.Join(quoted, ", ")
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	for _, stmt := range []string{
		"ALTER SYSTEM SET synchronous_standby_names = " + quoteLiteral(names),
		"ALTER SYSTEM SET synchronous_commit = " + quoteLiteral(commit),
		"SELECT pg_reload_conf()",
	} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("pgcluster: set sync: %w", err)
		}
	}
	return c.waitSyncApplied(ctx, names, commit)
}

// waitSyncApplied waits until the reload of SetSync is in force. A new
// session seeing the values means the postmaster has read them and
// signalled its children; the CHECKPOINT then makes the checkpointer,
// which publishes to committing sessions whether synchronous standbys
// are defined, take the signal in before it answers.
func (c *Cluster) waitSyncApplied(ctx context.Context, names, commit string) error {
	err := poll(ctx, func(ctx context.Context) error {
		var gotNames, gotCommit string
		if err := c.queryRow(ctx, "SELECT current_setting('synchronous_standby_names'), current_setting('synchronous_commit')",
			nil, &gotNames, &gotCommit); err != nil {
			return err
		}
		if gotNames != names || gotCommit != commit {
			return fmt.Errorf("synchronous_standby_names %q, synchronous_commit %q", gotNames, gotCommit)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("pgcluster: set sync: %w", err)
	}
	return c.exec(ctx, "CHECKPOINT")
}

func quoteLiteral(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// Promote makes a standby the primary (pg_ctl promote) and returns once
// it accepts writes. Its timeline is then one higher; see
// [Cluster.Timeline] for where that shows.
func (c *Cluster) Promote(ctx context.Context) error {
	if err := c.runTool(ctx, "pg_ctl", "promote", "promote", "-D", c.dataDir(), "--no-wait"); err != nil {
		return err
	}
	err := poll(ctx, func(ctx context.Context) error {
		var recovering bool
		if err := c.queryRow(ctx, "SELECT pg_is_in_recovery()", nil, &recovering); err != nil {
			return err
		}
		if recovering {
			return errors.New("still in recovery")
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("pgcluster: promote %s: %w", c.name, err)
	}
	return nil
}

// Rewind re-attaches c, a former primary, as a standby of newPrimary, as
// a failover manager does: c is stopped if it runs, rewound with
// pg_rewind to where the timelines forked (what only c had is gone), and
// started following newPrimary. When pg_rewind fails (c is from another
// system, or lacks the WAL it needs), a fresh base backup replaces c's
// data directory instead ([Cluster.Rebuild]); rewound says which
// happened, and Dir/rewind.log holds pg_rewind's output.
//
// pg_rewind runs crash recovery on a crashed c itself, in single-user
// mode, which reads the data directory's configuration and not c's
// command line: that is why StartPrimary puts data checksums and
// wal_keep_size there.
func (c *Cluster) Rewind(ctx context.Context, newPrimary *Cluster) (rewound bool, err error) {
	c.Stop()
	// A just-promoted primary's control file names its old timeline until
	// its first checkpoint, and pg_rewind reads the timeline from there.
	if err := newPrimary.exec(ctx, "CHECKPOINT"); err != nil {
		return false, err
	}
	rewindErr := c.runTool(ctx, "pg_rewind", "rewind",
		"-D", c.dataDir(), "--source-server", newPrimary.conninfo("postgres"), "--no-sync", "--progress")
	if rewindErr != nil {
		_ = appendFile(filepath.Join(c.dir, "rewind.log"), rewindErr.Error()+"\n")
		if ctx.Err() != nil {
			return false, rewindErr
		}
		return false, c.Rebuild(ctx, newPrimary)
	}
	return true, c.startFollowing(ctx, newPrimary, false)
}

// Rebuild makes c a standby of primary from a fresh base backup: c is
// stopped if it runs and its data directory replaced. It is the fallback
// when pg_rewind cannot bring a former primary back.
func (c *Cluster) Rebuild(ctx context.Context, primary *Cluster) error {
	c.Stop()
	if err := os.RemoveAll(c.dataDir()); err != nil {
		return err
	}
	if err := c.baseBackup(ctx, primary); err != nil {
		return err
	}
	return c.startFollowing(ctx, primary, false)
}

// MultiHostURL is a connection URL naming all the clusters, tried in
// order, as pgx (pgconn.ParseConfig) and libpq read it:
// postgres://postgres@127.0.0.1:p1,127.0.0.1:p2/db?target_session_attrs=…
// attrs is target_session_attrs: "read-write" (or "primary") finds the
// primary, "standby" a standby, "prefer-standby" a standby if one
// answers and otherwise the primary; "" means "any".
func MultiHostURL(database, attrs string, clusters ...*Cluster) string {
	hosts := make([]string, len(clusters))
	for i, c := range clusters {
		hosts[i] = "127.0.0.1:" + strconv.Itoa(c.port)
	}
	url := fmt.Sprintf("postgres://postgres@%s/%s?sslmode=disable", strings.Join(hosts, ","), database)
	if attrs != "" {
		url += "&target_session_attrs=" + attrs
	}
	return url
}
