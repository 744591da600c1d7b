package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/internal/ctl/admin"
	"github.com/queengate/queengate/internal/ctl/cli"
	"github.com/queengate/queengate/internal/ctl/output"
)

const dlqUsage = `Usage:
  queenctl dlq list QUEUE [selection flags]
  queenctl dlq redrive QUEUE [selection flags] [--yes]

A queue's dead letters are in its dead-letter queue (QUEUE-dlq). list
shows those not yet redriven; redrive pushes them back to their partition,
each with its original transactionId and data, exactly once. Both are
operator commands, over --http or NATS, with the admin token.

Run 'queenctl dlq COMMAND --help' for a command's arguments and flags.

`

const dlqListUsage = `Usage:
  queenctl dlq list QUEUE [--partition P] [--group G] [--from-offset N] [--to-offset N] [--limit N]

Lists QUEUE's dead letters not yet redriven, partition by partition in
offset order: what 'dlq redrive' with the same flags would move. Each
row: partition, the dead letter's offset in the dead-letter queue, the
group that dead-lettered it, the original offset and transactionId,
attempts and error (cut to 256 bytes). The offsets select by the
original message's offset, both inclusive.

`

const dlqRedriveUsage = `Usage:
  queenctl dlq redrive QUEUE [--partition P] [--group G] [--from-offset N] [--to-offset N] [--limit N] [--yes]

Pushes QUEUE's dead letters that the flags select back to their
partition, each with its original transactionId and data, and consumes
them from the dead-letter queue in the same transaction: each moves
once, however often the command is run or interrupted. Every consumer
group of the queue receives a redriven message (it is a new message at
the end of its partition). Without --limit every selected dead letter is
moved, a request of up to 1000 at a time.

It first lists how many dead letters the selection holds and asks for
confirmation on the terminal; --yes skips the question (for scripts).

`

// dlqSelection registers the selection flags and returns the request they
// make, checked.
func dlqSelection(fs *flag.FlagSet) func(name string) (queengate.DeadLettersRequest, error) {
	partition := fs.String("partition", "", "only this `partition`'s dead letters")
	group := fs.String("group", "", "only those this consumer `group` dead-lettered")
	from := fs.Int64("from-offset", 0, "only original offsets from `N` on")
	to := fs.Int64("to-offset", 0, "only original offsets up to `N`")
	limit := fs.Int("limit", 0, fmt.Sprintf("at most `N` (1-%d; default: list %d, redrive all)", queengate.MaxRedrive, queengate.MaxRedrive))
	return func(name string) (queengate.DeadLettersRequest, error) {
		req := queengate.DeadLettersRequest{Partition: *partition, Group: *group, Limit: *limit}
		for _, n := range []struct{ what, v string }{{"partition", *partition}, {"group", *group}} {
			if n.v != "" {
				if err := checkName(n.what, n.v); err != nil {
					return req, err
				}
			}
		}
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		switch {
		case set["from-offset"] && set["to-offset"] && *from > *to:
			return req, cli.Usagef("%s: --from-offset %d is above --to-offset %d", name, *from, *to)
		case set["limit"] && (*limit < 1 || *limit > queengate.MaxRedrive):
			return req, cli.Usagef("%s: --limit %d: must be 1-%d", name, *limit, queengate.MaxRedrive)
		}
		if set["from-offset"] {
			req.FromOffset = from
		}
		if set["to-offset"] {
			req.ToOffset = to
		}
		return req, nil
	}
}

// dlqQueue is the one QUEUE argument.
func dlqQueue(name string, args []string) (string, error) {
	if len(args) != 1 {
		return "", cli.Usagef("%s: give exactly one QUEUE, e.g. queenctl %s orders", name, name)
	}
	return args[0], checkName("queue", args[0])
}

// dlqCommand is a dlq command's arguments checked: its queue, the
// selection its flags make, and the gateway to send it to.
func dlqCommand(ctx context.Context, s *session, name string, args []string,
	selection func(string) (queengate.DeadLettersRequest, error)) (string, queengate.DeadLettersRequest, admin.Client, error) {
	queue, err := dlqQueue(name, args)
	if err != nil {
		return "", queengate.DeadLettersRequest{}, nil, err
	}
	req, err := selection(name)
	if err != nil {
		return "", req, nil, err
	}
	c, err := s.admin(ctx)
	return queue, req, c, err
}

func setupDLQList(fs *flag.FlagSet) runFunc {
	selection := dlqSelection(fs)
	return func(ctx context.Context, s *session, args []string) error {
		queue, req, c, err := dlqCommand(ctx, s, "dlq list", args, selection)
		if err != nil {
			return err
		}
		a, raw, err := admin.ListDeadLetters(ctx, c, queue, req)
		if err != nil || s.g.output == "json" {
			if err == nil {
				err = output.PrintJSON(s.stdout, raw)
			}
			return err
		}
		if len(a.DeadLetters) == 0 {
			fmt.Fprintf(s.stdout, "no dead letters to redrive in queue %s\n", queue)
			return nil
		}
		tw := output.NewTable(s.stdout)
		fmt.Fprintln(tw, "PARTITION\tDLQ OFFSET\tGROUP\tOFFSET\tTRANSACTION ID\tATTEMPTS\tERROR")
		for _, d := range a.DeadLetters {
			output.Row(tw, d.Partition, d.DLQOffset, d.Group, d.Offset, d.TransactionID, d.Attempts, d.Error)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if a.More {
			fmt.Fprintln(s.stdout, "(more dead letters are selected than listed: narrow the selection, or raise --limit)")
		}
		return nil
	}
}

func setupDLQRedrive(fs *flag.FlagSet) runFunc {
	selection := dlqSelection(fs)
	yes := fs.Bool("yes", false, "redrive without asking for confirmation")
	return func(ctx context.Context, s *session, args []string) error {
		queue, req, c, err := dlqCommand(ctx, s, "dlq redrive", args, selection)
		if err != nil {
			return err
		}
		if !*yes {
			a, _, err := admin.ListDeadLetters(ctx, c, queue, req)
			if err != nil {
				return err
			}
			if len(a.DeadLetters) == 0 {
				fmt.Fprintf(s.stdout, "no dead letters to redrive in queue %s\n", queue)
				return nil
			}
			count := fmt.Sprint(len(a.DeadLetters))
			if a.More && req.Limit == 0 {
				count = "more than " + count
			}
			if err := confirmYes(s, fmt.Sprintf("redrive %s dead letters of queue %s back to their partitions?", count, queue),
				"nothing was moved"); err != nil {
				return err
			}
		}
		moved, total := map[string]int{}, 0
		var order []string
		for {
			raw, err := c.Do(ctx, admin.OpDLQ("redrive", queue, req))
			if err != nil {
				return fmt.Errorf("dlq redrive: %w (%d moved before)", err, total)
			}
			var a queengate.RedriveAnswer
			if err := output.DecodeAnswer(raw, &a); err != nil {
				return err
			}
			for _, p := range a.Partitions {
				if moved[p.Partition] == 0 {
					order = append(order, p.Partition)
				}
				moved[p.Partition] += p.Moved
			}
			total += a.Moved
			if !a.More || a.Moved == 0 || req.Limit != 0 {
				break
			}
		}
		if s.g.output == "json" {
			b, _ := json.Marshal(map[string]any{"queue": queue, "moved": total, "partitions": moved}) // plain fields: cannot fail
			return output.PrintJSON(s.stdout, b)
		}
		tw := output.NewTable(s.stdout)
		fmt.Fprintln(tw, "PARTITION\tMOVED")
		for _, p := range order {
			output.Row(tw, p, moved[p])
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		_, err = fmt.Fprintf(s.stdout, "%d dead letters redriven\n", total)
		return err
	}
}
