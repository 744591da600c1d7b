package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"slices"
	"strings"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/internal/ctl/admin"
	"github.com/queengate/queengate/internal/ctl/cli"
	"github.com/queengate/queengate/internal/ctl/output"
)

const deleteUsage = `Usage:
  queenctl delete group QUEUE GROUP [--yes]
  queenctl delete queue QUEUE [--yes]

Deletes a consumer group of a queue: its position on every partition, its
leases (their consumers' acks then answer 404) and what it holds back from
retention. It prints what the delete released: the partitions the group
had a position on, the messages it had not consumed, the leases it ended.
A pop naming the group afterwards makes it afresh, from each partition's
earliest message: stop the group's consumers first.

delete queue deletes a queue with everything of it: its messages and
transactionIds, configuration, partitions, consumer groups, pending
timers and dead-letter queue. It prints what it removed. A push naming
the queue afterwards makes a new queue that remembers nothing of the old
one (the same transactionIds are queued again).

queenctl asks for confirmation on its standard input (type the group's,
or the queue's, name) unless --yes is given.

`

func setupDelete(fs *flag.FlagSet) runFunc {
	yes := fs.Bool("yes", false, "delete without asking for confirmation")
	return func(ctx context.Context, s *session, args []string) error {
		if len(args) == 2 && args[0] == "queue" {
			return deleteQueue(ctx, s, args[1], *yes)
		}
		if len(args) != 3 || args[0] != "group" {
			return cli.Usagef("delete: use queenctl delete group QUEUE GROUP [--yes], or queenctl delete queue QUEUE [--yes]")
		}
		queue, group := args[1], args[2]
		if err := checkName("queue", queue); err != nil {
			return err
		}
		if err := checkName("group", group); err != nil {
			return err
		}
		if !*yes {
			if err := confirm(s, fmt.Sprintf("Delete consumer group %s of queue %s, with its positions and leases? Type the group's name to confirm: ", group, queue), "nothing was deleted", group); err != nil {
				return err
			}
		}
		c, err := s.admin(ctx)
		if err != nil {
			return err
		}
		var ans queengate.GroupDeleteAnswer
		if err := admin.AskInto(ctx, c, admin.OpDeleteGroup(queue, group), &ans); err != nil {
			return err
		}
		if s.g.output == "json" {
			b, _ := json.Marshal(ans)
			return output.PrintJSON(s.stdout, b)
		}
		_, err = fmt.Fprintf(s.stdout, "deleted consumer group %s of queue %s: it had a position on %d partitions, %d messages not consumed, %d leases running (ended)\n",
			ans.Group, ans.Queue, ans.Partitions, ans.Unconsumed, ans.LeasesEnded)
		return err
	}
}

// confirm asks on stderr and reads one line of stdin: nothing is sent
// unless it is want (a name, typed back exactly). untouched says what is
// then left as it was.
func confirm(s *session, question, untouched, want string) error {
	if got := answer(s, question); got != want {
		return cli.Usagef("not confirmed (read %q, want %q): %s; --yes skips the question", clipped(got), want, untouched)
	}
	return nil
}

// confirmYes asks a [y/N] question: y or yes, in any case, goes on;
// anything else leaves untouched as it was.
func confirmYes(s *session, question, untouched string) error {
	if got := answer(s, question+" [y/N] "); !slices.Contains([]string{"y", "yes"}, strings.ToLower(got)) {
		return cli.Usagef("not confirmed (read %q, want y or yes): %s; --yes skips the question", clipped(got), untouched)
	}
	return nil
}

// answer asks question on stderr and reads one line of stdin.
func answer(s *session, question string) string {
	fmt.Fprint(s.stderr, question)
	line, _ := bufio.NewReader(s.stdin).ReadString('\n')
	return strings.TrimSpace(line)
}

// clipped bounds what of a typed answer an error repeats.
func clipped(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
