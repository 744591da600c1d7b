package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/queengate/queengate/internal/ctl/output"
)

const applyUsage = `Usage:
  queenctl apply -f FILE [--dry-run]

Configures every queue the manifest names with mode "replace": an option
the manifest omits returns to its default, because a manifest is the whole
configuration. Queues the manifest does not name are left alone. -f - reads
the manifest from stdin.

The whole manifest is checked first (names, unknown keys, values, queues
named twice); if anything is wrong, nothing is sent and queenctl exits 2.

Manifest (the options are the wire's, in whole seconds; several YAML
documents separated by --- may each list queues):

  queues:
    - name: payments
      dedupWindowSeconds: 600     # default 3600; 0 turns deduplication off
      retentionSeconds: 86400     # default 0: keep messages forever
    - name: audit
      dedupWindowSeconds: 0

--dry-run changes nothing: it reads each queue's live configuration and
prints, per queue, "create", "unchanged", or each option that would change
(current → wanted, including options going back to their default).

`

func setupApply(fs *flag.FlagSet) runFunc {
	file := fs.String("f", "", "manifest `file`; - for stdin (required)")
	dryRun := fs.Bool("dry-run", false, "show what would change, change nothing")
	return func(ctx context.Context, s *session, args []string) error {
		if len(args) > 0 {
			return usagef("apply: unexpected arguments %q; the manifest is given with -f", args)
		}
		if *file == "" {
			return usagef("apply: give the manifest with -f FILE (or -f - for stdin)")
		}
		source, data, err := readManifest(*file, s.stdin)
		if err != nil {
			return err
		}
		specs, err := parseManifest(source, data)
		if err != nil {
			return err
		}
		c, err := s.admin(ctx)
		if err != nil {
			return err
		}
		if *dryRun {
			return applyDryRun(ctx, s, c, specs)
		}
		return applyManifest(ctx, s, c, specs)
	}
}

// applyManifest configures the queues in manifest order. It stops at the
// first error: the queues before it are applied, which the error says.
func applyManifest(ctx context.Context, s *session, c adminClient, specs []queueSpec) error {
	var (
		raws    [][]byte
		configs []queueConfig
		err     error
	)
	for _, spec := range specs {
		var raw []byte
		raw, err = c.do(ctx, opConfigure(configureRequest(spec.Name, spec.Options, "replace")))
		if err != nil {
			err = fmt.Errorf("apply queue %q: %w%s", spec.Name, err, appliedBefore(configs))
			break
		}
		var cfg queueConfig
		if err = output.DecodeAnswer(raw, &cfg); err != nil {
			break
		}
		raws, configs = append(raws, raw), append(configs, cfg)
	}
	if s.g.output == "json" {
		if perr := output.PrintJSON(s.stdout, output.JoinJSON(raws)); perr != nil && err == nil {
			err = perr
		}
		return err
	}
	if len(configs) > 0 {
		tw := output.NewTable(s.stdout)
		fmt.Fprintf(tw, "QUEUE\tRESULT\t%s\n", optionHeads())
		for i := range configs {
			result := "configured"
			if configs[i].Created != nil && *configs[i].Created {
				result = "created"
			}
			output.Row(tw, append([]any{configs[i].Queue, result}, optionCells(&configs[i])...)...)
		}
		tw.Flush()
	}
	return err
}

func appliedBefore(done []queueConfig) string {
	if len(done) == 0 {
		return "; no queue was changed"
	}
	var names []string
	for _, c := range done {
		names = append(names, c.Queue)
	}
	return "; applied before it: " + strings.Join(names, ", ")
}

// optionChange is one option a replace would change.
type optionChange struct {
	Option string `json:"option"`
	// Current is nil for a queue that does not exist yet.
	Current *optionValue `json:"current"`
	// Wanted is nil when the option is one queenctl does not know: replace
	// resets it to the gateway's default.
	Wanted *optionValue `json:"wanted"`
	// Default says that Wanted is the default because the manifest omits
	// the option.
	Default bool `json:"default,omitempty"`
}

// queueDiff is what apply would do to one queue.
type queueDiff struct {
	Queue   string         `json:"queue"`
	Action  string         `json:"action"` // create, update or unchanged
	Changes []optionChange `json:"changes,omitempty"`
}

// diffQueue compares a manifest's queue with its live configuration
// (current nil: the queue does not exist) under mode replace.
func diffQueue(spec queueSpec, current *queueConfig) queueDiff {
	d := queueDiff{Queue: spec.Name, Action: "update"}
	if current == nil {
		d.Action = "create"
	}
	for _, o := range knownOptions {
		wanted, given := spec.Options[o.name]
		if !given {
			wanted = o.def
		}
		ch := optionChange{Option: o.name, Wanted: &wanted, Default: !given}
		if current != nil {
			cur, ok := current.Options[o.name]
			if ok && cur.equal(wanted) {
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
			if _, known := findOption(k); !known {
				cur := current.Options[k]
				d.Changes = append(d.Changes, optionChange{Option: k, Current: &cur, Default: true})
			}
		}
	}
	if current != nil && len(d.Changes) == 0 {
		d.Action = "unchanged"
	}
	return d
}

// renderDiff prints a dry run's diffs for people.
func renderDiff(w io.Writer, diffs []queueDiff) {
	counts := map[string]int{}
	for _, d := range diffs {
		counts[d.Action]++
		fmt.Fprintf(w, "%s: %s\n", output.Printable(d.Queue), d.Action)
		for _, ch := range d.Changes {
			wanted := "its default (queenctl does not know this option)"
			if ch.Wanted != nil {
				wanted = formatOption(ch.Option, *ch.Wanted)
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
				current = formatOption(ch.Option, *ch.Current)
			}
			fmt.Fprintf(w, "  %s: %s → %s%s\n", output.Printable(ch.Option), output.Printable(current), output.Printable(wanted), note)
		}
	}
	fmt.Fprintf(w, "dry run: %d to create, %d to update, %d unchanged; nothing was changed\n",
		counts["create"], counts["update"], counts["unchanged"])
}

// applyDryRun reads each queue's live configuration and prints the diff.
func applyDryRun(ctx context.Context, s *session, c adminClient, specs []queueSpec) error {
	diffs := make([]queueDiff, 0, len(specs))
	for _, spec := range specs {
		raw, err := c.do(ctx, opGetQueue(spec.Name, ""))
		var ge *gatewayError
		switch {
		case errors.As(err, &ge) && ge.Code == 404 && ge.hint == "":
			diffs = append(diffs, diffQueue(spec, nil))
		case err != nil:
			return fmt.Errorf("read queue %q: %w", spec.Name, err)
		default:
			var cur queueConfig
			if err := output.DecodeAnswer(raw, &cur); err != nil {
				return err
			}
			diffs = append(diffs, diffQueue(spec, &cur))
		}
	}
	if s.g.output == "json" {
		raw, _ := json.Marshal(diffs)
		return output.PrintJSON(s.stdout, raw)
	}
	renderDiff(s.stdout, diffs)
	return nil
}
