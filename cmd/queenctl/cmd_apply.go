package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/queengate/queengate/internal/ctl/admin"
	"github.com/queengate/queengate/internal/ctl/cli"
	"github.com/queengate/queengate/internal/ctl/manifest"
	"github.com/queengate/queengate/internal/ctl/output"
	"github.com/queengate/queengate/internal/ctl/queueopt"
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
			return cli.Usagef("apply: unexpected arguments %q; the manifest is given with -f", args)
		}
		if *file == "" {
			return cli.Usagef("apply: give the manifest with -f FILE (or -f - for stdin)")
		}
		source, data, err := readManifest(*file, s.stdin)
		if err != nil {
			return err
		}
		specs, err := manifest.Parse(source, data)
		if err != nil {
			return &cli.UsageError{Msg: err.Error()}
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

// readManifest reads a manifest from a file, or from stdin for "-".
func readManifest(path string, stdin io.Reader) (source string, data []byte, err error) {
	if path == "-" {
		data, err = io.ReadAll(stdin)
		if err != nil {
			return "", nil, cli.Usagef("reading the manifest from stdin: %v", err)
		}
		return "stdin", data, nil
	}
	data, err = os.ReadFile(path)
	if err != nil {
		return "", nil, cli.Usagef("reading the manifest: %v", err)
	}
	return path, data, nil
}

// applyManifest configures the queues in manifest order. It stops at the
// first error: the queues before it are applied, which the error says.
func applyManifest(ctx context.Context, s *session, c admin.Client, specs []manifest.Queue) error {
	var (
		raws    [][]byte
		configs []queueopt.Config
		err     error
	)
	for _, spec := range specs {
		var raw []byte
		raw, err = c.Do(ctx, admin.OpConfigure(configureRequest(spec.Name, spec.Options, "replace")))
		if err != nil {
			err = fmt.Errorf("apply queue %q: %w%s", spec.Name, err, appliedBefore(configs))
			break
		}
		var cfg queueopt.Config
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
		fmt.Fprintf(tw, "QUEUE\tRESULT\t%s\n", queueopt.Heads())
		for i := range configs {
			result := "configured"
			if configs[i].Created != nil && *configs[i].Created {
				result = "created"
			}
			output.Row(tw, append([]any{configs[i].Queue, result}, queueopt.Cells(&configs[i])...)...)
		}
		tw.Flush()
	}
	return err
}

func appliedBefore(done []queueopt.Config) string {
	if len(done) == 0 {
		return "; no queue was changed"
	}
	var names []string
	for _, c := range done {
		names = append(names, c.Queue)
	}
	return "; applied before it: " + strings.Join(names, ", ")
}

// applyDryRun reads each queue's live configuration and prints the diff.
func applyDryRun(ctx context.Context, s *session, c admin.Client, specs []manifest.Queue) error {
	diffs := make([]manifest.QueueDiff, 0, len(specs))
	for _, spec := range specs {
		raw, err := c.Do(ctx, admin.OpGetQueue(spec.Name, ""))
		var ge *admin.GatewayError
		switch {
		case errors.As(err, &ge) && ge.Code == 404 && ge.Hint == "":
			diffs = append(diffs, manifest.DiffQueue(spec, nil))
		case err != nil:
			return fmt.Errorf("read queue %q: %w", spec.Name, err)
		default:
			var cur queueopt.Config
			if err := output.DecodeAnswer(raw, &cur); err != nil {
				return err
			}
			diffs = append(diffs, manifest.DiffQueue(spec, &cur))
		}
	}
	if s.g.output == "json" {
		raw, _ := json.Marshal(diffs)
		return output.PrintJSON(s.stdout, raw)
	}
	manifest.RenderDiff(s.stdout, diffs)
	return nil
}
