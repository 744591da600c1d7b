package main

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"time"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/internal/ctl/admin"
	"github.com/queengate/queengate/internal/ctl/cli"
	"github.com/queengate/queengate/internal/ctl/duration"
	"github.com/queengate/queengate/internal/ctl/output"
	"github.com/queengate/queengate/internal/ctl/tables"
)

const timerUsage = `Usage:
  queenctl timer schedule QUEUE PARTITION [DATA] (--at TIME | --in DURATION) [--txn-id ID]
  queenctl timer cancel TIMER_ID
  queenctl timer list [--queue QUEUE] [--limit N | --all]

A timer is a message pushed to a queue's partition at a given time, exactly
once: its fire removes the timer and pushes the message in one
transaction. schedule and cancel go over NATS (<prefix>.timer.QUEUE.PARTITION
and <prefix>.timer.cancel) and need --nats; list is an operator command,
over --http or NATS as get is, with the admin token.

Run 'queenctl timer COMMAND --help' for a command's arguments and flags.

`

const timerScheduleUsage = `Usage:
  queenctl timer schedule QUEUE PARTITION [DATA] (--at TIME | --in DURATION) [--txn-id ID]

Schedules a message for QUEUE's PARTITION, over NATS request-reply to
<prefix>.timer.QUEUE.PARTITION. Needs --nats. The queue and the partition
are created on first use, as a push creates them.

Give exactly one of:
  --at TIME       RFC 3339 with a zone: 2026-12-01T09:00:00Z,
                  2026-12-01T10:00:00+01:00
  --in DURATION   from the gateway's receipt: 90s, 10m, 1h30m, 7d, 1d12h;
                  0s fires at once
A time in the past fires at once.

DATA is the message's data as JSON; an argument that is not valid JSON is
sent as a JSON string (as push does). Without it the data is null. Put --
before data that starts with a dash.

--txn-id sets the message's transactionId; otherwise the gateway mints
one. Either way it is fixed now. Scheduling again after the fire makes a
second message: a fire does not probe the deduplication window.

Prints the timer's id (what cancel takes), its status (scheduled), fireAt
and transactionId.

`

const timerCancelUsage = `Usage:
  queenctl timer cancel TIMER_ID

Cancels a pending timer, over NATS request-reply to <prefix>.timer.cancel.
Needs --nats. Prints one word:
  cancelled   the timer was pending; it will not fire
  absent      no longer pending (fired, cancelled, or never existed)
Both exit 0. absent is not a failure of the fire: a timer that fired has
pushed its message, exactly once.

`

const timerListUsage = `Usage:
  queenctl timer list [--queue QUEUE] [--limit N | --all]

Lists pending timers, due first: timerId, queue, partition, transactionId
and fireAt. A timer is listed until it fires or is cancelled. The list is
asked for page after page (each answer fits one NATS message) until
--limit timers are listed, or with --all every one; when more are pending,
it says so. An operator
command: over --http (GET /timers) or, when only --nats is given, NATS
(<prefix>.timer.list), with the admin token.

`

// atFlag is --at: an RFC 3339 time with a zone.
type atFlag struct {
	set bool
	t   time.Time
}

func (f *atFlag) String() string {
	if f == nil || !f.set {
		return ""
	}
	return f.t.Format(time.RFC3339Nano)
}

func (f *atFlag) Set(s string) error {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return fmt.Errorf("want RFC 3339 with a zone, e.g. 2026-12-01T09:00:00Z or 2026-12-01T10:00:00+01:00")
	}
	f.set, f.t = true, t
	return nil
}

// delayFlag is --in: a delay in duration.ParseDelayMs's syntax.
type delayFlag struct {
	set bool
	ms  int64
}

func (f *delayFlag) String() string {
	if f == nil || !f.set {
		return ""
	}
	return (time.Duration(f.ms) * time.Millisecond).String()
}

func (f *delayFlag) Set(s string) error {
	ms, err := duration.ParseDelayMs(s)
	if err != nil {
		return err
	}
	f.set, f.ms = true, ms
	return nil
}

func setupTimerSchedule(fs *flag.FlagSet) runFunc {
	var at atFlag
	var in delayFlag
	fs.Var(&at, "at", "fire at this `time`, RFC 3339 with a zone, e.g. 2026-12-01T09:00:00Z")
	fs.Var(&in, "in", "fire after this `duration`, e.g. 90s, 10m, 7d; 0s fires at once")
	txnID := fs.String("txn-id", "", "the message's transactionId (`ID`); minted by the gateway when not given")
	return func(ctx context.Context, s *session, args []string) error {
		switch {
		case len(args) < 2:
			return cli.Usagef("timer schedule: give QUEUE and PARTITION, e.g. queenctl timer schedule payments p1 '{\"remind\":42}' --in 1h")
		case len(args) > 3:
			return cli.Usagef("timer schedule: unexpected arguments %q: DATA is one JSON value (quote it)", args[3:])
		}
		queue, partition := args[0], args[1]
		if err := checkName("queue", queue); err != nil {
			return err
		}
		if err := checkName("partition", partition); err != nil {
			return err
		}
		req := queengate.TimerRequest{TransactionID: *txnID}
		switch {
		case at.set && in.set:
			return cli.Usagef("timer schedule: give either --at or --in, not both")
		case !at.set && !in.set:
			return cli.Usagef("timer schedule: when? give --at TIME (RFC 3339, e.g. 2026-12-01T09:00:00Z) or --in DURATION (e.g. 90s, 1h, 7d)")
		case at.set:
			req.FireAt = at.t.Format(time.RFC3339Nano)
		default:
			req.DelayMs = &in.ms
		}
		if len(*txnID) > queengate.MaxTxnIDBytes {
			return cli.Usagef("timer schedule: --txn-id is %d bytes; a transactionId is 1-%d bytes", len(*txnID), queengate.MaxTxnIDBytes)
		}
		if len(args) == 3 {
			req.Data = json.RawMessage(args[2])
			if !json.Valid(req.Data) {
				req.Data, _ = json.Marshal(args[2])
			}
		}
		if s.g.natsURL == "" {
			return cli.Usagef("timer schedule needs NATS (the gateway takes timers over NATS only): set --nats or QUEENCTL_NATS_URL, e.g. --nats nats://127.0.0.1:4222")
		}
		body, err := req.AppendJSON(nil) // its data byte for byte
		if err != nil {
			return cli.Usagef("timer schedule: DATA: %v", err)
		}
		nc, err := s.nats(ctx)
		if err != nil {
			return err
		}
		raw, err := nc.Request(ctx, nc.Subjects.Timer(queue, partition), body)
		if err != nil {
			return fmt.Errorf("timer schedule: %w", err)
		}
		var a queengate.TimerScheduled
		if err := output.DecodeAnswer(raw, &a); err != nil {
			return err
		}
		if s.g.output == "json" {
			return output.PrintJSON(s.stdout, raw)
		}
		tw := output.NewTable(s.stdout)
		fmt.Fprintln(tw, "TIMER ID\tSTATUS\tFIRE AT\tTRANSACTION ID")
		output.Row(tw, a.TimerID, a.Status, output.Stamp(a.FireAt), a.TransactionID)
		return tw.Flush()
	}
}

func setupTimerCancel(*flag.FlagSet) runFunc {
	return func(ctx context.Context, s *session, args []string) error {
		switch {
		case len(args) == 0:
			return cli.Usagef("timer cancel: which timer? give its id, as timer schedule printed it, e.g. queenctl timer cancel 3f0c9a6e-…")
		case len(args) > 1:
			return cli.Usagef("timer cancel: give exactly one TIMER_ID; unexpected arguments %q", args[1:])
		case args[0] == "":
			return cli.Usagef("timer cancel: the TIMER_ID is empty")
		case s.g.natsURL == "":
			return cli.Usagef("timer cancel needs NATS (the gateway takes timers over NATS only): set --nats or QUEENCTL_NATS_URL, e.g. --nats nats://127.0.0.1:4222")
		}
		body, _ := json.Marshal(map[string]string{"timerId": args[0]}) // a string: cannot fail
		nc, err := s.nats(ctx)
		if err != nil {
			return err
		}
		raw, err := nc.Request(ctx, nc.Subjects.TimerCancel(), body)
		if err != nil {
			return fmt.Errorf("timer cancel: %w", err)
		}
		var a queengate.TimerCancelled
		if err := output.DecodeAnswer(raw, &a); err != nil {
			return err
		}
		if a.Status == "" {
			return fmt.Errorf("unexpected answer from the gateway (no status): %.200s", raw)
		}
		if s.g.output == "json" {
			return output.PrintJSON(s.stdout, raw)
		}
		_, err = fmt.Fprintln(s.stdout, output.Printable(a.Status))
		return err
	}
}

func setupTimerList(fs *flag.FlagSet) runFunc {
	queue := fs.String("queue", "", "only this `queue`'s timers (default every queue's)")
	limit := fs.Int("limit", 0, fmt.Sprintf("list at most `N` timers, 1-%d (default %d)", admin.MaxTimerList, admin.DefaultTimerList))
	all := fs.Bool("all", false, "list every pending timer, page after page (no --limit)")
	return func(ctx context.Context, s *session, args []string) error {
		if len(args) > 0 {
			return cli.Usagef("timer list: unexpected arguments %q (the queue is --queue QUEUE)", args)
		}
		if *queue != "" {
			if err := checkName("queue", *queue); err != nil {
				return err
			}
		}
		limitSet := false
		fs.Visit(func(f *flag.Flag) { limitSet = limitSet || f.Name == "limit" })
		switch {
		case limitSet && *all:
			return cli.Usagef("timer list: --limit and --all: give one")
		case limitSet && (*limit < 1 || *limit > admin.MaxTimerList):
			return cli.Usagef("timer list: --limit %d: must be 1-%d", *limit, admin.MaxTimerList)
		}
		c, err := s.admin(ctx)
		if err != nil {
			return err
		}
		want := cmp.Or(*limit, admin.DefaultTimerList)
		if *all {
			want = math.MaxInt
		}
		list, err := admin.ListTimers(ctx, c, *queue, *limit, want)
		if err != nil {
			return err
		}
		if s.g.output == "json" {
			b, _ := json.Marshal(list) // plain fields: cannot fail
			return output.PrintJSON(s.stdout, b)
		}
		return tables.PrintTimers(s.stdout, *queue, list)
	}
}
