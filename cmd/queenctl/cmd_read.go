package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"time"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/internal/ctl/admin"
	"github.com/queengate/queengate/internal/ctl/cli"
	"github.com/queengate/queengate/internal/ctl/output"
	"github.com/queengate/queengate/internal/ctl/tables"
)

const readUsage = `Usage:
  queenctl read QUEUE PARTITION [--from OFFSET] [--max N] [--follow [--poll DURATION]]

Prints a partition's messages in offset order, one JSON object per line:
offset, messageId, transactionId, createdAt and data exactly as pushed.
From --from (default 0) to the last message, or --max messages in all.
A read from below the first offset still stored (deleted by retention or
a purge) starts there and says so on stderr.

--follow keeps reading as messages arrive, asking again every --poll
(default 500ms) once it has caught up, until interrupted (exit 0).

Over --http it needs the admin token, when the gateway has one. Over NATS
(--nats alone) a read goes with the queue's data, like a pop: the NATS
user's permissions govern it, not the admin token.

`

const explainUsage = `Usage:
  queenctl explain QUEUE PARTITION TRANSACTION_ID

Says what a push of TRANSACTION_ID to the partition would be answered
now, and why: duplicate (of which offset and messageId, stored when, and
until when the window covers it; whether retention has deleted the
message itself) or new; and what the answering gateway's dedup cache
knows of it (the probe skipped, narrowed to the offsets it holds, or run
over the whole window). Changes nothing.

`

func setupRead(fs *flag.FlagSet) runFunc {
	from := fs.Int64("from", 0, "first `offset` to read")
	max := fs.Int("max", 0, "most messages to print in all (`N`; 0: no limit)")
	follow := fs.Bool("follow", false, "keep reading new messages until interrupted")
	poll := fs.Duration("poll", 500*time.Millisecond, "with --follow, how often to ask once caught up")
	return func(ctx context.Context, s *session, args []string) error {
		if len(args) != 2 {
			return cli.Usagef("read: want QUEUE PARTITION, e.g. queenctl read payments eu")
		}
		if err := checkName("queue", args[0]); err != nil {
			return err
		}
		if err := checkName("partition", args[1]); err != nil {
			return err
		}
		if *from < 0 || *max < 0 || *poll <= 0 {
			return cli.Usagef("read: --from and --max must be 0 or more, --poll positive")
		}
		c, err := s.admin(ctx)
		if err != nil {
			return err
		}
		r := reader{c: c, s: s, queue: args[0], partition: args[1], next: *from, left: *max}
		return r.run(ctx, *follow, *poll)
	}
}

// reader prints a partition's messages as JSON lines.
type reader struct {
	c                admin.Client
	s                *session
	queue, partition string
	next             int64
	left             int // 0: no limit
	warned           bool
}

func (r *reader) run(ctx context.Context, follow bool, poll time.Duration) error {
	for {
		n, err := r.batch(ctx)
		switch {
		case follow && ctx.Err() != nil:
			return nil // interrupted: the expected end of --follow
		case err != nil:
			return err
		case r.left < 0:
			return nil
		case n > 0:
			continue
		case !follow:
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(poll):
		}
	}
}

// batch reads and prints one answer; left goes below 0 when --max is met.
func (r *reader) batch(ctx context.Context) (int, error) {
	req := queengate.ReadRequest{From: r.next}
	if r.left > 0 {
		req.Max = min(r.left, queengate.MaxReadMax)
	}
	raw, err := r.c.Do(ctx, admin.OpRead(r.queue, r.partition, req))
	if err != nil {
		return 0, err
	}
	var ans struct {
		Messages    []json.RawMessage `json:"messages"`
		Next        int64             `json:"next"`
		FirstOffset int64             `json:"firstOffset"`
		Purged      bool              `json:"purged"`
	}
	if err := output.DecodeAnswer(raw, &ans); err != nil {
		return 0, err
	}
	if ans.Purged && !r.warned {
		r.warned = true
		fmt.Fprintf(r.s.stderr, "queenctl: offsets below %d %s; reading from %d\n", ans.FirstOffset, r.deletedBy(ctx), ans.FirstOffset)
	}
	for _, m := range ans.Messages {
		if _, err := fmt.Fprintf(r.s.stdout, "%s\n", m); err != nil {
			return 0, err
		}
	}
	r.next = ans.Next
	if r.left > 0 {
		if r.left -= len(ans.Messages); r.left == 0 {
			r.left = -1
		}
	}
	return len(ans.Messages), nil
}

// deletedBy says what deleted the messages below the first offset still
// stored, as far as the queue's options tell: with no retention
// (retentionSeconds 0) only a purge deletes messages. The options need
// the admin token; without it, or with retention on, either may have.
func (r *reader) deletedBy(ctx context.Context) string {
	var q struct {
		Options struct {
			RetentionSeconds *int `json:"retentionSeconds"`
		} `json:"options"`
	}
	err := admin.AskInto(ctx, r.c, admin.OpGetQueue(r.queue, ""), &q)
	if err == nil && q.Options.RetentionSeconds != nil && *q.Options.RetentionSeconds == 0 {
		return "were purged (the queue has no retention)"
	}
	return "are no longer stored (deleted by retention or a purge)"
}

func setupExplain(*flag.FlagSet) runFunc {
	return func(ctx context.Context, s *session, args []string) error {
		if len(args) != 3 {
			return cli.Usagef("explain: want QUEUE PARTITION TRANSACTION_ID")
		}
		if err := checkName("queue", args[0]); err != nil {
			return err
		}
		if err := checkName("partition", args[1]); err != nil {
			return err
		}
		c, err := s.admin(ctx)
		if err != nil {
			return err
		}
		raw, err := c.Do(ctx, admin.OpExplain(args[0], args[1], args[2]))
		if err != nil {
			return err
		}
		if s.g.output == "json" {
			return output.PrintJSON(s.stdout, raw)
		}
		var ans queengate.ExplainAnswer
		if err := output.DecodeAnswer(raw, &ans); err != nil {
			return err
		}
		return tables.PrintExplain(s.stdout, &ans)
	}
}
