package tables

import (
	"fmt"
	"io"
	"strings"

	"github.com/queengate/queengate"
	"github.com/queengate/queengate/internal/ctl/admin"
	"github.com/queengate/queengate/internal/ctl/duration"
	"github.com/queengate/queengate/internal/ctl/output"
	"github.com/queengate/queengate/internal/ctl/queueopt"
)

// PrintQueue writes a queue for people: its options, its partitions' figures
// (the stored ones, then this gateway's since it started) and its groups.
func PrintQueue(w io.Writer, q *queueopt.Config) error {
	queueopt.PrintConfig(w, q)
	fmt.Fprintln(w)
	if len(q.Partitions) == 0 {
		fmt.Fprintln(w, "no partitions yet (a push creates them)")
		return nil
	}
	tw := output.NewTable(w)
	fmt.Fprintln(tw, "PARTITION\tFIRST OFFSET\tLAST OFFSET\tSTORED\tBYTES\tOLDEST\tNEWEST")
	for _, p := range q.Partitions {
		output.Row(tw, p.Partition, p.FirstOffset, p.LastOffset, p.StoredMessages, output.HumanBytes(p.StoredBytes), output.OrDash(p.OldestAt), output.OrDash(p.NewestAt))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nThis gateway (the one that answered), since it started:")
	tw = output.NewTable(w)
	fmt.Fprintln(tw, "PARTITION\tQUEUED\tDUPLICATES\tFAILED\tCACHE\tRESIDENT HASHES")
	for _, p := range q.Partitions {
		output.Row(tw, p.Partition, p.Queued, p.Duplicates, p.Failed, p.Cache.State, p.Cache.ResidentHashes)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nConsumer groups:")
	return PrintGroups(w, q.Groups)
}

// PrintGroups writes consumer groups as a table: each group's position,
// lag and lease on each partition.
func PrintGroups(w io.Writer, groups []queengate.GroupView) error {
	if len(groups) == 0 {
		_, err := fmt.Fprintln(w, "no consumer groups yet (a pop creates them)")
		return err
	}
	tw := output.NewTable(w)
	fmt.Fprintln(tw, "GROUP\tPARTITION\tNEXT OFFSET\tLAST OFFSET\tLAG\tLEASED BY\tLEASE UNTIL\tDELAYED UNTIL")
	cut := false
	for _, g := range groups {
		if len(g.Partitions) < g.PartitionCount {
			// The answer had no room for them: the group's totals only.
			cut = true
			output.Row(tw, g.Group, fmt.Sprintf("(all %d)", g.PartitionCount), "-", "-", g.Lag, "-", "-", "-")
		}
		for _, p := range g.Partitions {
			leased, until, delayed := "-", "-", "-"
			if p.LeaseUntil != nil {
				leased, until = p.LeaseConsumer, output.Stamp(*p.LeaseUntil)
			}
			if p.DelayedUntil != nil {
				delayed = output.Stamp(*p.DelayedUntil)
			}
			output.Row(tw, g.Group, p.Partition, p.NextOffset, p.LastOffset, p.Lag, leased, until, delayed)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if cut {
		fmt.Fprintln(w, "(all N): the queue has more partitions than one answer carries with its groups; queenctl get groups QUEUE lists every one")
	}
	return printActivity(w, groups)
}

// printActivity writes how long each group has been idle, how many of
// its partitions a failure's delay holds, and whether it still holds
// retention back (groupIdleSeconds).
func printActivity(w io.Writer, groups []queengate.GroupView) error {
	fmt.Fprintln(w)
	tw := output.NewTable(w)
	fmt.Fprintln(tw, "GROUP\tIDLE\tDELAYED PARTITIONS\tHOLDS RETENTION")
	for _, g := range groups {
		holds := "yes"
		if !g.HoldsRetention {
			holds = "no: idle past groupIdleSeconds"
		}
		output.Row(tw, g.Group, duration.HumanSeconds(g.IdleMs/1000), g.DelayedPartitions, holds)
	}
	return tw.Flush()
}

// PrintTimers writes timers as a table, and says so when more are
// pending than were listed.
func PrintTimers(w io.Writer, queue string, list queengate.TimersAnswer) error {
	if len(list.Timers) == 0 {
		if queue != "" {
			fmt.Fprintf(w, "no pending timers in queue %s\n", queue)
		} else {
			fmt.Fprintln(w, "no pending timers")
		}
		return nil
	}
	tw := output.NewTable(w)
	fmt.Fprintln(tw, "TIMER ID\tQUEUE\tPARTITION\tTRANSACTION ID\tFIRE AT")
	for _, t := range list.Timers {
		output.Row(tw, t.TimerID, t.Queue, t.Partition, t.TransactionID, output.Stamp(t.FireAt))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if list.Next != nil {
		_, err := fmt.Fprintf(w, "the first %d, due first; more are pending (--limit, at most %d, or --all)\n", len(list.Timers), admin.MaxTimerList)
		return err
	}
	return nil
}

// PrintMoves writes the partitions a seek or create changed as a table.
func PrintMoves(w io.Writer, m queengate.GroupMoves) error {
	if len(m.Changes) == 0 {
		return nil
	}
	tw := output.NewTable(w)
	fmt.Fprintln(tw, "PARTITION\tFROM\tTO\tNOTE")
	for _, c := range m.Changes {
		var notes []string
		if c.Clamped {
			notes = append(notes, "clamped to what is stored")
		}
		if c.LeaseEnded {
			notes = append(notes, "lease ended")
		}
		note := strings.Join(notes, ", ")
		if note == "" {
			note = "-"
		}
		output.Row(tw, c.Partition, c.From, c.To, note)
	}
	if err := tw.Flush(); err != nil || !m.Truncated {
		return err
	}
	_, err := fmt.Fprintln(w, "(more partitions changed than one answer lists; the totals above count them all)")
	return err
}

// PrintExplain writes what explain answered: the verdict, the original
// it is measured against, and why.
func PrintExplain(w io.Writer, a *queengate.ExplainAnswer) error {
	tw := output.NewTable(w)
	output.Row(tw, "verdict:", a.Verdict)
	if o := a.Original; o != nil {
		output.Row(tw, "original:", fmt.Sprintf("offset %d, %s, stored %s", o.Offset, o.MessageID, output.Stamp(o.CreatedAt)))
		output.Row(tw, "covered until:", output.Stamp(o.CoveredUntil))
		output.Row(tw, "retained:", o.Retained)
	}
	output.Row(tw, "window:", queueopt.Format("dedupWindowSeconds", queueopt.Seconds(int64(a.WindowSeconds))))
	output.Row(tw, "cache:", fmt.Sprintf("%s, %s path", a.Cache.State, a.Cache.Path))
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w, output.Printable(a.Explanation))
	return err
}
