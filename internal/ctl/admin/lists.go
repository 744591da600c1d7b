package admin

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/queengate/queengate"
	"github.com/queengate/queengate/internal/ctl/output"
	"github.com/queengate/queengate/internal/ctl/queueopt"
)

// MaxTimerList is docs/admin-api.md's largest list limit.
const MaxTimerList = 10000

// DefaultTimerList is the gateway's list limit when none is sent.
const DefaultTimerList = 100

// AllQueues asks for the list of queues page after page: every queue, as
// the gateway answers it.
func AllQueues(ctx context.Context, c Client) ([]json.RawMessage, error) {
	var queues []json.RawMessage
	for from := ""; ; {
		raw, err := c.Do(ctx, OpListQueues(from))
		if err != nil {
			return nil, err
		}
		var page struct {
			Queues    []json.RawMessage `json:"queues"`
			NextQueue string            `json:"nextQueue"`
		}
		if err := output.DecodeAnswer(raw, &page); err != nil {
			return nil, err
		}
		queues = append(queues, page.Queues...)
		if err := pageAdvances(page.NextQueue, from, len(page.Queues)); err != nil || page.NextQueue == "" {
			return queues, err
		}
		from = page.NextQueue
	}
}

// pageAdvances checks that a page whose answer names a next one listed
// something, and moved on from where it started: a gateway that does not
// is refused rather than asked forever.
func pageAdvances(next, from string, listed int) error {
	if next != "" && (listed == 0 || next == from) {
		return fmt.Errorf("unexpected answer from the gateway: a page from %q lists %d and names %q next", from, listed, next)
	}
	return nil
}

// WholeQueue asks for a queue page after page (each answer holds the
// partitions that fit one NATS message and names the next one): the
// first page's answer with every partition, as JSON and decoded.
func WholeQueue(ctx context.Context, c Client, name string) ([]byte, queueopt.Config, error) {
	var (
		first      map[string]json.RawMessage
		q          queueopt.Config
		partitions []json.RawMessage
	)
	for from := ""; ; {
		raw, err := c.Do(ctx, OpGetQueue(name, from))
		if err != nil {
			return nil, q, err
		}
		var page struct {
			Partitions    []json.RawMessage `json:"partitions"`
			NextPartition string            `json:"nextPartition"`
		}
		if err := output.DecodeAnswer(raw, &page); err != nil {
			return nil, q, err
		}
		if first == nil {
			if err := output.DecodeAnswer(raw, &first); err != nil {
				return nil, q, err
			}
		}
		partitions = append(partitions, page.Partitions...)
		if err := pageAdvances(page.NextPartition, from, len(page.Partitions)); err != nil {
			return nil, q, err
		}
		if page.NextPartition == "" {
			break
		}
		from = page.NextPartition
	}
	first["partitions"], _ = json.Marshal(partitions) // raw JSON values: cannot fail
	delete(first, "nextPartition")
	raw, _ := json.Marshal(first) // raw JSON values: cannot fail
	return raw, q, output.DecodeAnswer(raw, &q)
}

// AllGroups asks for a queue's groups, then for the partitions each group
// was cut short of, from the one its answer names next.
func AllGroups(ctx context.Context, c Client, queue string) ([]queengate.GroupView, error) {
	var first queengate.GroupsAnswer
	if err := AskInto(ctx, c, OpGroups(queue, "", ""), &first); err != nil {
		return nil, err
	}
	for i := range first.Groups {
		g := &first.Groups[i]
		for from := g.NextPartition; from != ""; {
			var page queengate.GroupsAnswer
			if err := AskInto(ctx, c, OpGroups(queue, g.Group, from), &page); err != nil {
				return nil, err
			}
			if len(page.Groups) != 1 {
				return nil, fmt.Errorf("unexpected answer from the gateway: a page of group %q lists %d groups", g.Group, len(page.Groups))
			}
			next := page.Groups[0]
			if err := pageAdvances(next.NextPartition, from, len(next.Partitions)); err != nil {
				return nil, err
			}
			g.Partitions = append(g.Partitions, next.Partitions...)
			from = next.NextPartition
		}
		g.NextPartition = ""
	}
	return first.Groups, nil
}

// AskInto sends op and decodes its answer into v.
func AskInto(ctx context.Context, c Client, op Operation, v any) error {
	raw, err := c.Do(ctx, op)
	if err != nil {
		return err
	}
	return output.DecodeAnswer(raw, v)
}

// ListTimers asks for pending timers page after page, following each
// answer's next, until want are listed or none is left: an answer cut
// to fit one NATS message does not end the list short. limit is what
// the first page asks for (0: the gateway's default). The answer's Next
// is set when more are pending.
func ListTimers(ctx context.Context, c Client, queue string, limit, want int) (queengate.TimersAnswer, error) {
	list := queengate.TimersAnswer{Timers: []queengate.TimerView{}}
	for {
		raw, err := c.Do(ctx, OpListTimers(queue, limit, list.Next))
		if err != nil {
			return list, err
		}
		var page queengate.TimersAnswer
		if err := output.DecodeAnswer(raw, &page); err != nil {
			return list, err
		}
		if page.Next != nil && len(page.Timers) == 0 {
			return list, fmt.Errorf("unexpected answer from the gateway: an empty page of timers names a next one")
		}
		list.Timers, list.Next = append(list.Timers, page.Timers...), page.Next
		if list.Next == nil || len(list.Timers) >= want {
			return list, nil
		}
		limit = min(want-len(list.Timers), MaxTimerList)
	}
}

// ListDeadLetters asks for a queue's dead letters: the answer as JSON
// and decoded.
func ListDeadLetters(ctx context.Context, c Client, queue string, req queengate.DeadLettersRequest) (queengate.DeadLettersAnswer, []byte, error) {
	var a queengate.DeadLettersAnswer
	raw, err := c.Do(ctx, OpDLQ("list", queue, req))
	if err != nil {
		return a, nil, err
	}
	return a, raw, output.DecodeAnswer(raw, &a)
}
