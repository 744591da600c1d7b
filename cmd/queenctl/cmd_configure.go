package main

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strings"

	queengate "github.com/queengate/queengate"
)

func init() {
	commands["configure"] = &command{usage: configureUsage, setup: setupConfigure}
}

const configureUsage = `Usage:
  queenctl configure QUEUE [--dedup-window D] [--retention D] [--on-conflict M]
                           [--max-attempts N] [--retain-until age|consumed]
                           [--retry-delay D] [--retry-backoff D,D,...|none] [--replace]

Changes one queue's options and prints its whole configuration after the
change. Only the options given are sent (mode merge): the others keep their
values. With --replace, the options not given return to their defaults.
A queue that does not exist is created from the defaults.

Durations are Go durations with whole seconds (90s, 10m, 1h30m, 24h), with
an optional number of days in front (7d, 1d12h), or 0:
  --dedup-window 0   turns deduplication off for the queue
  --retention 0      keeps messages forever

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
	return humanSeconds(f.v)
}

func (f *secondsFlag) Set(s string) error {
	v, err := parseSeconds(s)
	if err != nil {
		return err
	}
	f.set, f.v = true, v
	return nil
}

func setupConfigure(fs *flag.FlagSet) runFunc {
	var window, retention secondsFlag
	fs.Var(&window, "dedup-window", "deduplication window (dedupWindowSeconds) as a `duration`, e.g. 10m; 0 turns it off")
	fs.Var(&retention, "retention", "how long messages are kept (retentionSeconds) as a `duration`, e.g. 7d; 0 keeps them forever")
	maxAttempts := fs.Int64("max-attempts", -1, "deliveries to a consumer group before a message is dead-lettered (maxAttempts); 0 never")
	retainUntil := fs.String("retain-until", "", "what retention waits for (retainUntil): age, or consumed (also every consumer group)")
	retryDelay := fs.String("retry-delay", "", "how long a failed message waits before it is delivered again (retryDelayMs) as a `duration`, e.g. 5s; 0 at once")
	retryBackoff := fs.String("retry-backoff", "", "that wait by attempt (retryBackoffMs) as comma-separated `durations`, e.g. 1s,5s,30s (the last for every later attempt); none turns it off")
	onConflict := fs.String("on-conflict", "", "what a duplicate with different data is answered (onConflict): ignore, flag (duplicate, marked conflict) or reject (failed)")
	replace := fs.Bool("replace", false, "mode replace: options not given return to their defaults")
	return func(ctx context.Context, s *session, args []string) error {
		if len(args) != 1 {
			return usagef("configure: give exactly one queue name, e.g. queenctl configure payments --dedup-window 10m")
		}
		queue := args[0]
		if err := checkName("queue", queue); err != nil {
			return err
		}
		options := map[string]optionValue{}
		if window.set {
			options["dedupWindowSeconds"] = seconds(window.v)
		}
		if retention.set {
			options["retentionSeconds"] = seconds(retention.v)
		}
		if *onConflict != "" {
			if o, _ := findOption("onConflict"); !slices.Contains(o.words, *onConflict) {
				return usagef("configure: --on-conflict %q: one of %s", *onConflict, strings.Join(o.words, ", "))
			}
			options["onConflict"] = word(*onConflict)
		}
		if *maxAttempts >= 0 {
			if *maxAttempts > maxOptionSeconds {
				return usagef("configure: --max-attempts %d: at most %d", *maxAttempts, maxOptionSeconds)
			}
			options["maxAttempts"] = count(*maxAttempts)
		}
		if *retainUntil != "" {
			if o, _ := findOption("retainUntil"); !slices.Contains(o.words, *retainUntil) {
				return usagef("configure: --retain-until %q: one of %s", *retainUntil, strings.Join(o.words, ", "))
			}
			options["retainUntil"] = word(*retainUntil)
		}
		if err := retryOptions(options, *retryDelay, *retryBackoff); err != nil {
			return err
		}
		mode := "merge"
		if *replace {
			mode = "replace"
		}
		req := configureRequest(queue, options, mode)
		c, err := s.admin(ctx)
		if err != nil {
			return err
		}
		raw, err := c.do(ctx, opConfigure(req))
		if err != nil {
			return err
		}
		if s.g.output == "json" {
			return printJSON(s.stdout, raw)
		}
		var cfg queueConfig
		if err := decodeAnswer(raw, &cfg); err != nil {
			return err
		}
		printConfig(s.stdout, &cfg)
		return nil
	}
}

// retryOptions reads --retry-delay and --retry-backoff ("" when not
// given) into options.
func retryOptions(options map[string]optionValue, delay, backoff string) error {
	if delay != "" {
		ms, err := retryDelayMs(delay)
		if err != nil {
			return usagef("configure: --retry-delay %q: %v", delay, err)
		}
		options["retryDelayMs"] = count(ms)
	}
	if backoff == "" {
		return nil
	}
	v := list()
	if backoff != "none" {
		for _, d := range strings.Split(backoff, ",") {
			ms, err := retryDelayMs(strings.TrimSpace(d))
			if err != nil {
				return usagef("configure: --retry-backoff %q: %q: %v", backoff, d, err)
			}
			v.List = append(v.List, ms)
		}
	}
	if len(v.List) > maxRetryBackoff {
		return usagef("configure: --retry-backoff: %d delays, at most %d", len(v.List), maxRetryBackoff)
	}
	options["retryBackoffMs"] = v
	return nil
}

// retryDelayMs reads a retry delay as whole milliseconds, at most a day.
func retryDelayMs(s string) (int64, error) {
	ms, err := parseDelayMs(s)
	if err == nil && ms > queengate.MaxDelayMs {
		err = fmt.Errorf("too long, at most 1d (%d ms)", int64(queengate.MaxDelayMs))
	}
	return ms, err
}

// configureRequest is the wire request setting options.
func configureRequest(queue string, options map[string]optionValue, mode string) queengate.ConfigureRequest {
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
