package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/queengate/queengate/internal/ctl/admin"
	"github.com/queengate/queengate/internal/ctl/cli"
	"github.com/queengate/queengate/internal/ctl/duration"
	"github.com/queengate/queengate/internal/ctl/output"
)

const statusUsage = `Usage:
  queenctl status

Prints a gateway's health (ready, PostgreSQL, NATS, schema version), its
dedup cache figures and message counts. Over --http it is that gateway;
over --nats it is whichever gateway of the queue group answers.

`

func setupStatus(*flag.FlagSet) runFunc {
	return func(ctx context.Context, s *session, args []string) error {
		if len(args) > 0 {
			return cli.Usagef("status: unexpected arguments %q", args)
		}
		c, err := s.admin(ctx)
		if err != nil {
			return err
		}
		raw, err := c.Do(ctx, admin.OpStatus())
		if err != nil {
			return err
		}
		if s.g.output == "json" {
			return output.PrintJSON(s.stdout, raw)
		}
		// Whatever figures the gateway reports, in its order: a newer
		// gateway's additions show up without a queenctl release.
		kv, err := output.Flatten(raw)
		if err != nil {
			return err
		}
		tw := output.NewTable(s.stdout)
		for _, p := range kv {
			output.Row(tw, p[0]+":", inSeconds(p[0], p[1]))
		}
		return tw.Flush()
	}
}

// inSeconds shows a figure in seconds (a key ending in "Seconds") in
// whole seconds with its duration, "687 (11m27s)": the gateway sends
// the uptime to the nanosecond, which no operator reads.
func inSeconds(key, value string) string {
	f, err := strconv.ParseFloat(value, 64)
	if !strings.HasSuffix(key, "Seconds") || err != nil || f < 0 || f > math.MaxInt32*1000 {
		return value
	}
	s := int64(math.Round(f))
	return fmt.Sprintf("%d (%s)", s, duration.HumanSeconds(s))
}
