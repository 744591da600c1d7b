package main

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strings"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/internal/ctl/admin"
	"github.com/queengate/queengate/internal/ctl/cli"
	"github.com/queengate/queengate/internal/ctl/duration"
	"github.com/queengate/queengate/internal/ctl/output"
	"github.com/queengate/queengate/internal/ctl/queueopt"
)

const configureUsage = `Usage:
  queenctl configure QUEUE [--dedup-window D] [--retention D] [--on-conflict M]
                           [--max-attempts N] [--max-ack-pending N] [--retain-until age|consumed]
                           [--retry-delay D] [--retry-backoff D,D,...|none] [--group-idle D]
                           [--max-unheard-deliveries N] [--replace]

Changes one queue's options and prints its whole configuration after the
change. Only the options given are sent (mode merge): the others keep their
values. With --replace, the options not given return to their defaults.
A queue that does not exist is created from the defaults.

Durations are Go durations with whole seconds (90s, 10m, 1h30m, 24h), with
an optional number of days in front (7d, 1d12h), or 0:
  --dedup-window 0   turns deduplication off for the queue
  --retention 0      keeps messages forever
  --group-idle 7d    a consumer group idle for 7 days stops holding
                     retention back (0: every group holds it)

--on-conflict says what a duplicate whose data differs from its original's
is answered: ignore (the default: duplicate), flag (duplicate, marked
"conflict") or reject (failed, with a conflict error). Nothing is written
in any case.

--retry-delay is how long a failed message waits before it is delivered
again to its group (up to 1d, in milliseconds on the wire: retryDelayMs);
--retry-backoff the same wait by attempt, replacing it (retryBackoffMs):
  --retry-backoff 1s,5s,30s   1s after the first attempt, 5s after the
                              second, 30s after every later one
  --retry-backoff none        no list: --retry-delay decides

--max-unheard-deliveries N: every N leases of a group that run out with
nothing heard from their consumer (no ack, renewal or release), from the
same message, count that message's attempts (maxUnheardDeliveries,
default 3), so that --max-attempts ends a message that kills its consumer;
0 never counts them.

`

// secondsFlag is a duration flag in whole seconds that remembers whether
// it was given, since merge sends only the options given.
type secondsFlag struct {
	set bool
	v   int64
}

func (f *secondsFlag) String() string {
	if f == nil || !f.set {
		return ""
	}
	return duration.HumanSeconds(f.v)
}

func (f *secondsFlag) Set(s string) error {
	v, err := duration.ParseSeconds(s)
	if err != nil {
		return err
	}
	f.set, f.v = true, v
	return nil
}

func setupConfigure(fs *flag.FlagSet) runFunc {
	f := defineConfigureFlags(fs)
	return func(ctx context.Context, s *session, args []string) error {
		if len(args) != 1 {
			return cli.Usagef("configure: give exactly one queue name, e.g. queenctl configure payments --dedup-window 10m")
		}
		queue := args[0]
		if err := checkName("queue", queue); err != nil {
			return err
		}
		options, err := f.options()
		if err != nil {
			return err
		}
		mode := "merge"
		if *f.replace {
			mode = "replace"
		}
		req := configureRequest(queue, options, mode)
		c, err := s.admin(ctx)
		if err != nil {
			return err
		}
		raw, err := c.Do(ctx, admin.OpConfigure(req))
		if err != nil {
			return err
		}
		if s.g.output == "json" {
			return output.PrintJSON(s.stdout, raw)
		}
		var cfg queueopt.Config
		if err := output.DecodeAnswer(raw, &cfg); err != nil {
			return err
		}
		queueopt.PrintConfig(s.stdout, &cfg)
		return nil
	}
}

// configureFlags are configure's option flags; each left unset (not given,
// or an empty word) leaves its option out of the request.
type configureFlags struct {
	fs                                     *flag.FlagSet // what was given
	window, retention, groupIdle           secondsFlag
	maxAttempts, maxAckPending, maxUnheard *int64
	retainUntil, retryDelay, retryBackoff  *string
	onConflict                             *string
	replace                                *bool
}

func defineConfigureFlags(fs *flag.FlagSet) *configureFlags {
	f := &configureFlags{fs: fs}
	fs.Var(&f.window, "dedup-window", "deduplication window (dedupWindowSeconds) as a `duration`, e.g. 10m; 0 turns it off")
	fs.Var(&f.retention, "retention", "how long messages are kept (retentionSeconds) as a `duration`, e.g. 7d; 0 keeps them forever")
	f.maxAttempts = fs.Int64("max-attempts", 0, "deliveries to a consumer group before a message is dead-lettered (maxAttempts); 0 never")
	f.maxAckPending = fs.Int64("max-ack-pending", 0, "messages each consumer group may hold delivered and not yet settled (maxAckPending); 0 no limit")
	f.maxUnheard = fs.Int64("max-unheard-deliveries", 0,
		"leases in a row run out unheard from a message that count one attempt, so a message that kills its consumer is dead-lettered (maxUnheardDeliveries); 0 none")
	f.retainUntil = fs.String("retain-until", "", "what retention waits for (retainUntil): age, or consumed (also every consumer group)")
	f.retryDelay = fs.String("retry-delay", "", "how long a failed message waits before it is delivered again (retryDelayMs) as a `duration`, e.g. 5s; 0 at once")
	f.retryBackoff = fs.String("retry-backoff", "", "that wait by attempt (retryBackoffMs) as comma-separated `durations`, e.g. 1s,5s,30s (the last for every later attempt); none turns it off")
	fs.Var(&f.groupIdle, "group-idle", "after how long idle a consumer group stops holding retention (groupIdleSeconds) as a `duration`, e.g. 7d; 0: groups always hold")
	f.onConflict = fs.String("on-conflict", "", "what a duplicate with different data is answered (onConflict): ignore, flag (duplicate, marked conflict) or reject (failed)")
	f.replace = fs.Bool("replace", false, "mode replace: options not given return to their defaults")
	return f
}

// options are the queue options the flags give, checked where queenctl
// can say what to fix before asking the gateway.
func (f *configureFlags) options() (map[string]queueopt.Value, error) {
	options := map[string]queueopt.Value{}
	if f.window.set {
		options["dedupWindowSeconds"] = queueopt.Seconds(f.window.v)
	}
	if f.retention.set {
		options["retentionSeconds"] = queueopt.Seconds(f.retention.v)
	}
	if f.groupIdle.set {
		options["groupIdleSeconds"] = queueopt.Seconds(f.groupIdle.v)
	}
	if *f.onConflict != "" {
		if o, _ := queueopt.Find("onConflict"); !slices.Contains(o.Words, *f.onConflict) {
			return nil, cli.Usagef("configure: --on-conflict %q: one of %s", *f.onConflict, strings.Join(o.Words, ", "))
		}
		options["onConflict"] = queueopt.Word(*f.onConflict)
	}
	if flagGiven(f.fs, "max-attempts") {
		if *f.maxAttempts > duration.MaxSeconds {
			return nil, cli.Usagef("configure: --max-attempts %d: at most %d", *f.maxAttempts, duration.MaxSeconds)
		}
		options["maxAttempts"] = queueopt.Count(*f.maxAttempts)
	}
	if flagGiven(f.fs, "max-ack-pending") {
		options["maxAckPending"] = queueopt.Count(*f.maxAckPending) // its range is the gateway's to say
	}
	if flagGiven(f.fs, "max-unheard-deliveries") {
		options["maxUnheardDeliveries"] = queueopt.Count(*f.maxUnheard) // its range is the gateway's to say
	}
	if *f.retainUntil != "" {
		if o, _ := queueopt.Find("retainUntil"); !slices.Contains(o.Words, *f.retainUntil) {
			return nil, cli.Usagef("configure: --retain-until %q: one of %s", *f.retainUntil, strings.Join(o.Words, ", "))
		}
		options["retainUntil"] = queueopt.Word(*f.retainUntil)
	}
	if err := retryOptions(options, *f.retryDelay, *f.retryBackoff); err != nil {
		return nil, err
	}
	return options, nil
}

// retryOptions reads --retry-delay and --retry-backoff ("" when not
// given) into options.
func retryOptions(options map[string]queueopt.Value, delay, backoff string) error {
	if delay != "" {
		ms, err := retryDelayMs(delay)
		if err != nil {
			return cli.Usagef("configure: --retry-delay %q: %v", delay, err)
		}
		options["retryDelayMs"] = queueopt.Count(ms)
	}
	if backoff == "" {
		return nil
	}
	v := queueopt.List()
	if backoff != "none" {
		for _, d := range strings.Split(backoff, ",") {
			ms, err := retryDelayMs(strings.TrimSpace(d))
			if err != nil {
				return cli.Usagef("configure: --retry-backoff %q: %q: %v", backoff, d, err)
			}
			v.List = append(v.List, ms)
		}
	}
	if len(v.List) > queueopt.MaxRetryBackoff {
		return cli.Usagef("configure: --retry-backoff: %d delays, at most %d", len(v.List), queueopt.MaxRetryBackoff)
	}
	options["retryBackoffMs"] = v
	return nil
}

// retryDelayMs reads a retry delay as whole milliseconds, at most a day.
func retryDelayMs(s string) (int64, error) {
	ms, err := duration.ParseDelayMs(s)
	if err == nil && ms > queengate.MaxDelayMs {
		err = fmt.Errorf("too long, at most 1d (%d ms)", int64(queengate.MaxDelayMs))
	}
	return ms, err
}

// configureRequest is the wire request setting options.
func configureRequest(queue string, options map[string]queueopt.Value, mode string) queengate.ConfigureRequest {
	req := queengate.ConfigureRequest{Queue: queue, Options: map[string]int64{}, Mode: mode}
	for name, v := range options {
		switch name {
		case "onConflict":
			req.OnConflict = v.Word
		case "retainUntil":
			req.RetainUntil = v.Word
		case "retryBackoffMs":
			req.RetryBackoffMs = make([]int, len(v.List))
			for i, ms := range v.List {
				req.RetryBackoffMs[i] = int(ms)
			}
		default:
			req.Options[name] = v.Number
		}
	}
	return req
}
