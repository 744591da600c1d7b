package manifest

import (
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/queengate/queengate/internal/ctl/output"
	"github.com/queengate/queengate/internal/ctl/queueopt"
)

// OptionChange is one option a replace would change.
type OptionChange struct {
	Option string `json:"option"`
	// Current is nil for a queue that does not exist yet.
	Current *queueopt.Value `json:"current"`
	// Wanted is nil when the option is one queenctl does not know: replace
	// resets it to the gateway's default.
	Wanted *queueopt.Value `json:"wanted"`
	// Default says that Wanted is the default because the manifest omits
	// the option.
	Default bool `json:"default,omitempty"`
}

// QueueDiff is what apply would do to one queue.
type QueueDiff struct {
	Queue   string         `json:"queue"`
	Action  string         `json:"action"` // create, update or unchanged
	Changes []OptionChange `json:"changes,omitempty"`
}

// DiffQueue compares a manifest's queue with its live configuration
// (current nil: the queue does not exist) under mode replace.
func DiffQueue(spec Queue, current *queueopt.Config) QueueDiff {
	d := QueueDiff{Queue: spec.Name, Action: "update"}
	if current == nil {
		d.Action = "create"
	}
	for _, o := range queueopt.Known {
		wanted, given := spec.Options[o.Name]
		if !given {
			wanted = o.Def
		}
		ch := OptionChange{Option: o.Name, Wanted: &wanted, Default: !given}
		if current != nil {
			cur, ok := current.Options[o.Name]
			if ok && cur.Equal(wanted) {
				continue
			}
			if ok {
				ch.Current = &cur
			}
		}
		d.Changes = append(d.Changes, ch)
	}
	if current != nil {
		for _, k := range slices.Sorted(maps.Keys(current.Options)) {
			if _, known := queueopt.Find(k); !known {
				cur := current.Options[k]
				d.Changes = append(d.Changes, OptionChange{Option: k, Current: &cur, Default: true})
			}
		}
	}
	if current != nil && len(d.Changes) == 0 {
		d.Action = "unchanged"
	}
	return d
}

// RenderDiff prints a dry run's diffs for people.
func RenderDiff(w io.Writer, diffs []QueueDiff) {
	counts := map[string]int{}
	for _, d := range diffs {
		counts[d.Action]++
		fmt.Fprintf(w, "%s: %s\n", output.Printable(d.Queue), d.Action)
		for _, ch := range d.Changes {
			wanted := "its default (queenctl does not know this queueopt.Option)"
			if ch.Wanted != nil {
				wanted = queueopt.Format(ch.Option, *ch.Wanted)
			}
			note := ""
			if ch.Default && ch.Wanted != nil {
				note = ", the default"
				if d.Action == "update" {
					note = ", the default: the manifest omits it"
				}
			}
			if d.Action == "create" {
				fmt.Fprintf(w, "  %s: %s%s\n", output.Printable(ch.Option), output.Printable(wanted), note)
				continue
			}
			current := "unset"
			if ch.Current != nil {
				current = queueopt.Format(ch.Option, *ch.Current)
			}
			fmt.Fprintf(w, "  %s: %s → %s%s\n", output.Printable(ch.Option), output.Printable(current), output.Printable(wanted), note)
		}
	}
	fmt.Fprintf(w, "dry run: %d to create, %d to update, %d unchanged; nothing was changed\n",
		counts["create"], counts["update"], counts["unchanged"])
}
