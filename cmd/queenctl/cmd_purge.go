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

const purgeUsage = `Usage:
  queenctl purge queue QUEUE [--partition PARTITION] [--yes]

Deletes the messages stored in a queue (or in one of its partitions) and
cancels its pending timers; its consumer groups move past what was
deleted (their running leases end). Messages pushed while it runs are
kept. The queue, its configuration and its groups stay, and so do the
transactionIds: a retry of one within the deduplication window still
answers duplicate. It prints what it removed.

queenctl asks for confirmation on its standard input (type the queue's
name) unless --yes is given.

`

func setupPurge(fs *flag.FlagSet) runFunc {
	yes := fs.Bool("yes", false, "purge without asking for confirmation")
	partition := fs.String("partition", "", "purge this partition only")
	return func(ctx context.Context, s *session, args []string) error {
		if len(args) != 2 || args[0] != "queue" {
			return cli.Usagef("purge: use queenctl purge queue QUEUE [--partition PARTITION] [--yes]")
		}
		queue := args[1]
		if err := checkName("queue", queue); err != nil {
			return err
		}
		what := "every partition"
		if *partition != "" {
			if err := checkName("partition", *partition); err != nil {
				return err
			}
			what = "partition " + *partition
		}
		if !*yes {
			question := fmt.Sprintf("Purge the messages of queue %s (%s) and its pending timers? Type the queue's name to confirm: ", queue, what)
			if err := confirm(s, question, "nothing was purged", queue); err != nil {
				return err
			}
		}
		return askAndPrint(ctx, s, admin.OpPurgeQueue(queue, *partition), func(ans queengate.QueuePurgeAnswer) string {
			return fmt.Sprintf("purged queue %s (%s): %d partitions, %d messages (%d bytes), %d timers; %d groups moved past them, %d messages they had not consumed, %d leases ended",
				ans.Queue, what, ans.Partitions, ans.Messages, ans.Bytes, ans.Timers, ans.Groups, ans.Unconsumed, ans.LeasesEnded)
		})
	}
}

// deleteQueue is queenctl delete queue QUEUE.
func deleteQueue(ctx context.Context, s *session, queue string, yes bool) error {
	if err := checkName("queue", queue); err != nil {
		return err
	}
	if !yes {
		question := fmt.Sprintf("Delete queue %s with its messages, groups, timers and dead-letter queue? Type the queue's name to confirm: ", queue)
		if err := confirm(s, question, "nothing was deleted", queue); err != nil {
			return err
		}
	}
	return askAndPrint(ctx, s, admin.OpDeleteQueue(queue), func(ans queengate.QueueDeleteAnswer) string {
		dlq := "no dead-letter queue"
		if ans.DeadLetterQueue != "" {
			dlq = fmt.Sprintf("dead-letter queue %s with %d dead letters", ans.DeadLetterQueue, ans.DeadLetters)
		}
		return fmt.Sprintf("deleted queue %s: %d partitions, %d messages (%d bytes), %d groups (%d leases ended), %d timers, %s",
			ans.Queue, ans.Partitions, ans.Messages, ans.Bytes, ans.Groups, ans.LeasesEnded, ans.Timers, dlq)
	})
}

// askAndPrint sends op and prints its answer: as the gateway's JSON with
// -o json, else as the line line makes of it.
func askAndPrint[T any](ctx context.Context, s *session, op admin.Operation, line func(T) string) error {
	c, err := s.admin(ctx)
	if err != nil {
		return err
	}
	var ans T
	if err := admin.AskInto(ctx, c, op, &ans); err != nil {
		return err
	}
	if s.g.output == "json" {
		b, _ := json.Marshal(ans)
		return output.PrintJSON(s.stdout, b)
	}
	_, err = fmt.Fprintln(s.stdout, line(ans))
	return err
}
