package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strings"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/internal/ctl/admin"
	"github.com/queengate/queengate/internal/ctl/cli"
	"github.com/queengate/queengate/internal/ctl/output"
	"github.com/queengate/queengate/internal/ctl/queueopt"
	"github.com/queengate/queengate/internal/ctl/tables"
)

const getUsage = `Usage:
  queenctl get queues           every queue with its options
  queenctl get queue QUEUE      one queue: its options, its partitions and
                                its consumer groups
  queenctl get groups QUEUE     the queue's consumer groups: where each is
                                on each partition, its lag, its lease and
                                until when a failure's delay holds it
  queenctl get message MESSAGE_ID
  queenctl get message QUEUE PARTITION TRANSACTION_ID
                                one stored message, by the messageId a push
                                answered, or by transactionId (the copy a
                                duplicate would name, within the window)

get queues, get queue and get groups print every queue and every
partition: an answer holds what fits one NATS message and names where the
next starts, and queenctl asks page after page. get groups asks the
consumer-facing groups request (NATS: <prefix>.consume.groups.QUEUE, which
a consumer of the queue may send; HTTP: GET /queues/QUEUE/groups).

For each partition: lastOffset (-1: nothing stored yet), txnsStart (the
purge watermark), messages and duplicates counted by the answering gateway
since it started, and that gateway's dedup cache entry (state and resident
hashes).

`

func setupGet(*flag.FlagSet) runFunc {
	return func(ctx context.Context, s *session, args []string) error {
		switch {
		case len(args) == 1 && args[0] == "queues":
			return getQueues(ctx, s)
		case len(args) == 2 && (args[0] == "queue" || args[0] == "queues"):
			if err := checkName("queue", args[1]); err != nil {
				return err
			}
			return getQueue(ctx, s, args[1])
		case len(args) == 2 && args[0] == "groups":
			if err := checkName("queue", args[1]); err != nil {
				return err
			}
			return getGroups(ctx, s, args[1])
		case len(args) == 2 && args[0] == "message":
			return getMessage(ctx, s, admin.OpGetMessage(args[1]))
		case len(args) == 4 && args[0] == "message":
			if err := checkName("queue", args[1]); err != nil {
				return err
			}
			if err := checkName("partition", args[2]); err != nil {
				return err
			}
			return getMessage(ctx, s, admin.OpGetTransaction(args[1], args[2], args[3]))
		case len(args) > 0 && args[0] == "message":
			return cli.Usagef("get message: want MESSAGE_ID, or QUEUE PARTITION TRANSACTION_ID")
		case len(args) == 1 && args[0] == "queue":
			return cli.Usagef("get queue: which queue? e.g. queenctl get queue payments")
		default:
			return cli.Usagef("get: use 'get queues', 'get queue QUEUE', 'get groups QUEUE' or 'get message ...'")
		}
	}
}

func getQueues(ctx context.Context, s *session) error {
	c, err := s.admin(ctx)
	if err != nil {
		return err
	}
	queues, err := admin.AllQueues(ctx, c)
	if err != nil {
		return err
	}
	if s.g.output == "json" {
		b, _ := json.Marshal(struct {
			Queues []json.RawMessage `json:"queues"`
			Count  int               `json:"count"`
		}{queues, len(queues)})
		return output.PrintJSON(s.stdout, b)
	}
	if len(queues) == 0 {
		fmt.Fprintln(s.stdout, "no queues")
		return nil
	}
	tw := output.NewTable(s.stdout)
	fmt.Fprintf(tw, "QUEUE\t%s\tCREATED\tUPDATED\n", queueopt.Heads())
	for _, raw := range queues {
		var q queueopt.Config
		if err := output.DecodeAnswer(raw, &q); err != nil {
			return err
		}
		output.Row(tw, append(append([]any{q.Queue}, queueopt.Cells(&q)...), output.Stamp(q.CreatedAt), output.Stamp(q.UpdatedAt))...)
	}
	return tw.Flush()
}

// admin.AllQueues asks for the queue list page after page (each answer holds
// what fits one NATS message and names the next queue), so that what is
// printed is every queue.

func getQueue(ctx context.Context, s *session, name string) error {
	c, err := s.admin(ctx)
	if err != nil {
		return err
	}
	raw, q, err := admin.WholeQueue(ctx, c, name)
	if err != nil {
		return err
	}
	if s.g.output == "json" {
		return output.PrintJSON(s.stdout, raw)
	}
	return tables.PrintQueue(s.stdout, &q)
}

func getMessage(ctx context.Context, s *session, op admin.Operation) error {
	c, err := s.admin(ctx)
	if err != nil {
		return err
	}
	raw, err := c.Do(ctx, op)
	if err != nil {
		return err
	}
	if s.g.output == "json" {
		return output.PrintJSON(s.stdout, raw)
	}
	var m queengate.MessageAnswer
	if err := output.DecodeAnswer(raw, &m); err != nil {
		return err
	}
	tw := output.NewTable(s.stdout)
	output.Row(tw, "queue:", m.Queue)
	output.Row(tw, "partition:", m.Partition)
	output.Row(tw, "offset:", m.Offset)
	output.Row(tw, "messageId:", m.MessageID)
	output.Row(tw, "transactionId:", m.TransactionID)
	output.Row(tw, "createdAt:", output.Stamp(m.CreatedAt))
	output.Row(tw, "data:", string(m.Data))
	if m.DataEncoding != "" {
		output.Row(tw, "dataEncoding:", m.DataEncoding)
	}
	for _, name := range slices.Sorted(maps.Keys(m.Headers)) {
		output.Row(tw, "header:", name+": "+strings.Join(m.Headers[name], ", "))
	}
	return tw.Flush()
}

// getGroups prints a queue's consumer groups, each with every partition:
// the groups answer lists the partitions that fit one NATS message, and
// queenctl asks for the rest group by group, page after page.
func getGroups(ctx context.Context, s *session, name string) error {
	c, err := s.admin(ctx)
	if err != nil {
		return err
	}
	groups, err := admin.AllGroups(ctx, c, name)
	if err != nil {
		return err
	}
	if s.g.output == "json" {
		b, _ := json.Marshal(queengate.GroupsAnswer{Queue: name, Groups: groups})
		return output.PrintJSON(s.stdout, b)
	}
	return tables.PrintGroups(s.stdout, groups)
}
