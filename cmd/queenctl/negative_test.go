package main

import (
	"flag"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/queengate/queengate/internal/ctl/cli"
)

// numericFlag is a number flag of a command: its name and a negative
// value for it.
type numericFlag struct {
	command  []string // e.g. ["timer", "list"]
	name     string
	negative string
}

// numericFlags lists every flag of every command (global ones too)
// whose value is a number or a Go duration.
func numericFlags() []numericFlag {
	var out []numericFlag
	var walk func(prefix []string, cmds []*command)
	walk = func(prefix []string, cmds []*command) {
		for _, c := range cmds {
			name := append(slices.Clone(prefix), c.Name)
			if c.Subs != nil {
				walk(name, c.Subs)
				continue
			}
			fs := cli.NewFlagSet("t")
			c.Setup(fs)
			newGlobals(func(string) (string, bool) { return "", false }).register(fs)
			fs.VisitAll(func(f *flag.Flag) {
				g, ok := f.Value.(flag.Getter)
				if !ok {
					return
				}
				switch g.Get().(type) {
				case int, int64, float64:
					out = append(out, numericFlag{name, f.Name, "-3"})
				case time.Duration:
					out = append(out, numericFlag{name, f.Name, "-3s"})
				}
			})
		}
	}
	walk(nil, commands())
	return out
}

// Every number queenctl takes, of every command, refuses a negative
// value: a usage error (exit 2) naming the flag and the value, and
// nothing is sent; never taken for "not given" (configure
// --max-attempts -1 once changed nothing and exited 0). Flags that parse
// their own numbers (durations in days, PARTITION=N, delays in strings)
// are listed by hand.
func TestNegativeNumbersAreUsageErrors(t *testing.T) {
	t.Parallel()
	f := newFakeGateway(t, func(w http.ResponseWriter, r *http.Request) { answerJSON(w, 200, `{}`) })
	type negCase struct {
		args []string
		want []string
	}
	var cases []negCase
	found := map[string]bool{}
	for _, nf := range numericFlags() {
		found[strings.Join(nf.command, " ")+" --"+nf.name] = true
		cases = append(cases, negCase{append(slices.Clone(nf.command), "--"+nf.name, nf.negative),
			[]string{strings.Join(nf.command, " ") + ": --" + nf.name + " " + nf.negative + ": must not be negative"}})
	}
	for _, must := range []string{"configure --max-attempts", "configure --max-ack-pending", "seek --offset", "consume --count",
		"consume --max-bytes", "dlq list --from-offset", "dlq redrive --to-offset", "read --from", "push --batch", "timer list --limit", "status --timeout"} {
		if !found[must] {
			t.Errorf("no numeric flag %s found: the walk misses flags (found %v)", must, found)
		}
	}
	for _, c := range []struct {
		args      []string
		flag, bad string
	}{
		{[]string{"configure", "q", "--dedup-window", "-3s"}, "dedup-window", "-3s"},
		{[]string{"configure", "q", "--retention", "-3d"}, "retention", "-3d"},
		{[]string{"configure", "q", "--group-idle", "-3m"}, "group-idle", "-3m"},
		{[]string{"configure", "q", "--retry-delay", "-3s"}, "retry-delay", "-3s"},
		{[]string{"configure", "q", "--retry-backoff", "1s,-3s"}, "retry-backoff", "-3s"},
		{[]string{"create", "group", "q", "g", "--offset", "p=-3"}, "offset", "p=-3"},
		{[]string{"timer", "schedule", "q", "p", "1", "--in", "-3s"}, "in", "-3s"},
	} {
		cases = append(cases, negCase{c.args, []string{c.flag, c.bad, "0 or more"}})
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			t.Parallel()
			ctl(t, "", append(c.args, "--http", f.URL, "--nats", deadNATS)...).expect(t, exitUsage, c.want...)
		})
	}
	t.Cleanup(func() {
		if n := f.requests(); n != 0 {
			t.Errorf("%d requests sent for negative numbers", n)
		}
	})
}

// 0 is a value, not "not given", where it means something: configure
// --max-attempts 0 (never dead-letter) and --max-ack-pending 0 (no
// limit), seek --offset 0, dlq --from-offset 0 --to-offset 0 are sent.
func TestZeroIsSentWhereItMeansSomething(t *testing.T) {
	t.Parallel()
	f := newFakeGateway(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/configure":
			answerJSON(w, 200, `{"queue":"q","options":{"maxAttempts":0,"maxAckPending":0}}`)
		case strings.HasSuffix(r.URL.Path, "/seek"):
			answerJSON(w, 200, `{"queue":"q","group":"g","partitions":1,"moved":1,"changes":[{"partition":"p","from":5,"to":0}]}`)
		default:
			answerJSON(w, 200, `{"queue":"q","deadLetters":[]}`)
		}
	})
	h := []string{"--http", f.URL}
	ctl(t, "", append(h, "configure", "q", "--max-attempts", "0", "--max-ack-pending", "0")...).expect(t, exitOK)
	ctl(t, "", append(h, "seek", "group", "q", "g", "--offset", "0", "--yes")...).expect(t, exitOK)
	ctl(t, "", append(h, "dlq", "list", "q", "--from-offset", "0", "--to-offset", "0")...).expect(t, exitOK)
	f.mu.Lock()
	defer f.mu.Unlock()
	var got []string
	for i, r := range f.reqs {
		got = append(got, r.Method+" "+r.URL.Path+" "+r.URL.RawQuery+" "+f.body[i])
	}
	want := []string{
		`POST /configure  {"queue":"q","options":{"maxAckPending":0,"maxAttempts":0},"mode":"merge"}`,
		`POST /queues/q/groups/g/seek  {"offset":0}`,
		`POST /queues/q/dlq/list  {"fromOffset":0,"toOffset":0}`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("requests\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
