package main

import (
	"context"
	"flag"
	"fmt"
)

func init() {
	commands["get"] = &command{usage: getUsage, setup: setupGet}
}

const getUsage = `Usage:
  queenctl get queues           every queue with its options
  queenctl get queue QUEUE      one queue: its options and its partitions

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
		case len(args) == 1 && args[0] == "queue":
			return usagef("get queue: which queue? e.g. queenctl get queue payments")
		default:
			return usagef("get: use 'get queues' or 'get queue QUEUE'")
		}
	}
}

func getQueues(ctx context.Context, s *session) error {
	c, err := s.admin(ctx)
	if err != nil {
		return err
	}
	raw, err := c.do(ctx, opListQueues())
	if err != nil {
		return err
	}
	if s.g.output == "json" {
		return printJSON(s.stdout, raw)
	}
	var list struct {
		Queues []queueConfig `json:"queues"`
	}
	if err := decodeAnswer(raw, &list); err != nil {
		return err
	}
	if len(list.Queues) == 0 {
		fmt.Fprintln(s.stdout, "no queues")
		return nil
	}
	tw := newTable(s.stdout)
	fmt.Fprintf(tw, "QUEUE\t%s\tCREATED\tUPDATED\n", optionHeads())
	for i := range list.Queues {
		q := &list.Queues[i]
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", q.Queue, optionCells(q), q.CreatedAt, q.UpdatedAt)
	}
	return tw.Flush()
}

func getQueue(ctx context.Context, s *session, name string) error {
	c, err := s.admin(ctx)
	if err != nil {
		return err
	}
	raw, err := c.do(ctx, opGetQueue(name))
	if err != nil {
		return err
	}
	if s.g.output == "json" {
		return printJSON(s.stdout, raw)
	}
	var q queueConfig
	if err := decodeAnswer(raw, &q); err != nil {
		return err
	}
	printConfig(s.stdout, &q)
	fmt.Fprintln(s.stdout)
	if len(q.Partitions) == 0 {
		fmt.Fprintln(s.stdout, "no partitions yet (a push creates them)")
		return nil
	}
	tw := newTable(s.stdout)
	fmt.Fprintln(tw, "PARTITION\tLAST OFFSET\tTXNS START\tMESSAGES\tDUPLICATES\tCACHE\tRESIDENT HASHES")
	for _, p := range q.Partitions {
		state, hashes := "-", "-"
		if p.Cache != nil {
			state, hashes = p.Cache.State, fmt.Sprint(p.Cache.ResidentHashes)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\t%s\n", p.Partition, p.LastOffset, p.TxnsStart, p.Messages, p.Duplicates, state, hashes)
	}
	return tw.Flush()
}
