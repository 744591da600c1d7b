package main

import (
	"context"
	"flag"
	queengate "github.com/queengate/queengate"
)

func init() {
	commands["configure"] = &command{usage: configureUsage, setup: setupConfigure}
}

const configureUsage = `Usage:
  queenctl configure QUEUE [--dedup-window D] [--retention D] [--replace]

Changes one queue's options and prints its whole configuration after the
change. Only the options given are sent (mode merge): the others keep their
values. With --replace, the options not given return to their defaults.
A queue that does not exist is created from the defaults.

Durations are Go durations with whole seconds (90s, 10m, 1h30m, 24h), with
an optional number of days in front (7d, 1d12h), or 0:
  --dedup-window 0   turns deduplication off for the queue
  --retention 0      keeps messages forever

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
	replace := fs.Bool("replace", false, "mode replace: options not given return to their defaults")
	return func(ctx context.Context, s *session, args []string) error {
		if len(args) != 1 {
			return usagef("configure: give exactly one queue name, e.g. queenctl configure payments --dedup-window 10m")
		}
		queue := args[0]
		if err := checkName("queue", queue); err != nil {
			return err
		}
		req := queengate.ConfigureRequest{Queue: queue, Options: map[string]int64{}, Mode: "merge"}
		if *replace {
			req.Mode = "replace"
		}
		if window.set {
			req.Options["dedupWindowSeconds"] = window.v
		}
		if retention.set {
			req.Options["retentionSeconds"] = retention.v
		}
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
