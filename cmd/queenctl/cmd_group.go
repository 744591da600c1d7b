package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/internal/ctl/admin"
	"github.com/queengate/queengate/internal/ctl/cli"
	"github.com/queengate/queengate/internal/ctl/output"
	"github.com/queengate/queengate/internal/ctl/tables"
)

const createUsage = `Usage:
  queenctl create group QUEUE GROUP [--start earliest|latest | --offset PARTITION=N ... | --at TIME]

Creates a consumer group of a queue, starting on each partition at:
  --start earliest   every message stored (the default, as a pop's group)
  --start latest     only messages pushed after the create
  --offset P=N       offset N of partition P (repeat for more partitions;
                     the others start at their earliest)
  --at TIME          the first message stored at or after TIME (RFC 3339)
A partition created later starts at its first message, whatever the start.
Creating a group that exists with the same start changes nothing; with
another start it is refused (409): delete the group first.

`

const seekUsage = `Usage:
  queenctl seek group QUEUE GROUP (--offset N | --at TIME) [--partition P] [--yes]

Moves a consumer group, on every partition or on --partition alone, to
offset N or to the first message stored at or after TIME (RFC 3339).
Everything before the new position counts as consumed; everything from it
on is delivered again, at attempt 1. Leases running there end (their
consumers' acks then settle nothing). An offset below what retention kept,
or past the last message, is clamped, and the answer says so. It prints
what moved: each partition's next offset before and after.

queenctl asks for confirmation on its standard input (type the group's
name) unless --yes is given.

`

// offsetsFlag is create's --offset PARTITION=N, repeatable.
type offsetsFlag map[string]int64

func (f offsetsFlag) String() string { return fmt.Sprint(map[string]int64(f)) }

func (f offsetsFlag) Set(s string) error {
	p, n, ok := strings.Cut(s, "=")
	off, err := strconv.ParseInt(n, 10, 64)
	if !ok || err != nil || !queengate.ValidName(p) {
		return fmt.Errorf("want PARTITION=OFFSET, e.g. p0=42")
	}
	if off < 0 {
		return fmt.Errorf("offset %d: must be 0 or more", off)
	}
	if _, dup := f[p]; dup {
		return fmt.Errorf("partition %s is given twice", p)
	}
	f[p] = off
	return nil
}

func setupCreate(fs *flag.FlagSet) runFunc {
	start := fs.String("start", "", "earliest (every stored message) or latest (only messages pushed after the create)")
	offsets := offsetsFlag{}
	fs.Var(offsets, "offset", "`PARTITION=N`: start that partition at offset N (repeatable)")
	var at atFlag
	fs.Var(&at, "at", "start at the first message stored at or after this `TIME` (RFC 3339)")
	return func(ctx context.Context, s *session, args []string) error {
		queue, group, err := groupArgs("create", args)
		if err != nil {
			return err
		}
		var req queengate.GroupCreateRequest
		given := 0
		if *start != "" {
			if *start != "earliest" && *start != "latest" {
				return cli.Usagef("create: --start %q: earliest or latest", *start)
			}
			req.Start, given = *start, given+1
		}
		if len(offsets) > 0 {
			req.Offsets, given = offsets, given+1
		}
		if at.set {
			req.Time, given = &at.t, given+1
		}
		if given > 1 {
			return cli.Usagef("create: give one of --start, --offset and --at")
		}
		var ans queengate.GroupCreateAnswer
		if done, err := askGroup(ctx, s, admin.OpCreateGroup(queue, group, req), &ans); done || err != nil {
			return err
		}
		if !ans.Created {
			_, err := fmt.Fprintf(s.stdout, "consumer group %s of queue %s exists with the same start: nothing changed\n", group, queue)
			return err
		}
		fmt.Fprintf(s.stdout, "created consumer group %s of queue %s on %d partitions\n", group, queue, ans.Partitions)
		return tables.PrintMoves(s.stdout, ans.GroupMoves)
	}
}

func setupSeek(fs *flag.FlagSet) runFunc {
	offset := fs.Int64("offset", 0, "move to offset `N` (the next message delivered)")
	var at atFlag
	fs.Var(&at, "at", "move to the first message stored at or after this `TIME` (RFC 3339)")
	partition := fs.String("partition", "", "move this `PARTITION` only (default: every partition of the group)")
	yes := fs.Bool("yes", false, "seek without asking for confirmation")
	return func(ctx context.Context, s *session, args []string) error {
		queue, group, err := groupArgs("seek", args)
		if err != nil {
			return err
		}
		if flagGiven(fs, "offset") == at.set {
			return cli.Usagef("seek: give --offset N or --at TIME (one of them)")
		}
		req := queengate.GroupSeekRequest{Partition: *partition}
		if *partition != "" {
			if err := checkName("partition", *partition); err != nil {
				return err
			}
		}
		if at.set {
			req.Time = &at.t
		} else {
			req.Offset = offset
		}
		if !*yes {
			question := fmt.Sprintf("Move consumer group %s of queue %s (%s) to %s, ending its leases there? Type the group's name to confirm: ",
				group, queue, orEvery(*partition), seekTarget(req))
			if err := confirm(s, question, "nothing was moved", group); err != nil {
				return err
			}
		}
		var ans queengate.GroupSeekAnswer
		if done, err := askGroup(ctx, s, admin.OpSeekGroup(queue, group, req), &ans); done || err != nil {
			return err
		}
		fmt.Fprintf(s.stdout, "moved consumer group %s of queue %s on %d of %d partitions (%d clamped, %d leases ended)\n",
			group, queue, ans.Moved, ans.Partitions, ans.Clamped, ans.LeasesEnded)
		return tables.PrintMoves(s.stdout, ans.GroupMoves)
	}
}

// groupArgs checks "group QUEUE GROUP".
func groupArgs(verb string, args []string) (queue, group string, err error) {
	if len(args) != 3 || args[0] != "group" {
		return "", "", cli.Usagef("%s: use queenctl %s group QUEUE GROUP [flags]", verb, verb)
	}
	if err := checkName("queue", args[1]); err != nil {
		return "", "", err
	}
	return args[1], args[2], checkName("group", args[2])
}

// askGroup sends op and decodes its answer into v; with --output json it
// prints the answer too, and done says so.
func askGroup(ctx context.Context, s *session, op admin.Operation, v any) (done bool, err error) {
	c, err := s.admin(ctx)
	if err != nil {
		return false, err
	}
	if err := admin.AskInto(ctx, c, op, v); err != nil || s.g.output != "json" {
		return false, err
	}
	b, _ := json.Marshal(v)
	return true, output.PrintJSON(s.stdout, b)
}

func orEvery(partition string) string {
	if partition == "" {
		return "every partition"
	}
	return "partition " + partition
}

func seekTarget(req queengate.GroupSeekRequest) string {
	if req.Time != nil {
		return "the first message at or after " + req.Time.Format(time.RFC3339Nano)
	}
	return "offset " + strconv.FormatInt(*req.Offset, 10)
}
