package manifest

import (
	"errors"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/queengate/queengate/internal/ctl/queueopt"
)

func TestParseManifestValid(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		yaml string
		want []Queue
	}{
		{
			name: "two queues, options given or omitted",
			yaml: "queues:\n  - name: payments\n    dedupWindowSeconds: 600\n    retentionSeconds: 86400\n  - name: audit\n    dedupWindowSeconds: 0\n  - name: plain\n",
			want: []Queue{
				{Name: "payments", Options: opts(map[string]int64{"dedupWindowSeconds": 600, "retentionSeconds": 86400}), Line: 2},
				{Name: "audit", Options: opts(map[string]int64{"dedupWindowSeconds": 0}), Line: 5},
				{Name: "plain", Options: opts(map[string]int64{}), Line: 7},
			},
		},
		{
			name: "several documents, an empty one, digits as a name",
			yaml: "queues:\n  - name: a\n---\n---\nqueues:\n  - name: 007\n    retentionSeconds: 2147483647\n",
			want: []Queue{
				{Name: "a", Options: opts(map[string]int64{}), Line: 2},
				{Name: "007", Options: opts(map[string]int64{"retentionSeconds": 2147483647}), Line: 6},
			},
		},
		{
			name: "a word option",
			yaml: "queues:\n  - name: ledger\n    onConflict: reject\n",
			want: []Queue{{Name: "ledger", Options: map[string]queueopt.Value{"onConflict": queueopt.Word("reject")}, Line: 2}},
		},
		{
			name: "retry delays, a list in either style",
			yaml: "queues:\n  - name: r\n    retryDelayMs: 5000\n    retryBackoffMs: [1000, 60000]\n  - name: s\n    retryBackoffMs:\n      - 0\n      - 86400000\n  - name: t\n    retryBackoffMs: []\n",
			want: []Queue{
				{Name: "r", Options: map[string]queueopt.Value{"retryDelayMs": queueopt.Count(5000), "retryBackoffMs": queueopt.List(1000, 60000)}, Line: 2},
				{Name: "s", Options: map[string]queueopt.Value{"retryBackoffMs": queueopt.List(0, 86400000)}, Line: 5},
				{Name: "t", Options: map[string]queueopt.Value{"retryBackoffMs": queueopt.List()}, Line: 9},
			},
		},
		{
			name: "flow style",
			yaml: `{queues: [{name: x, dedupWindowSeconds: 1}]}`,
			want: []Queue{{Name: "x", Options: opts(map[string]int64{"dedupWindowSeconds": 1}), Line: 1}},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got, err := Parse("m.yaml", []byte(c.yaml))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %+v\nwant %+v", got, c.want)
			}
		})
	}
}

// TestParseManifestErrors checks that every problem is reported at once,
// with its line and what to fix, as an *Error.
func TestParseManifestErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		yaml string
		want []string // each a substring of the message, in this order
	}{
		{
			name: "unknown keys, queue level and top level",
			yaml: "queues:\n  - name: a\n    dedupWindow: 10m\nqueue: []\n",
			want: []string{
				`line 3: unknown key "dedupWindow" in a queue; a queue takes name, dedupWindowSeconds, retentionSeconds, onConflict`,
				`line 4: unknown key "queue"; a manifest has one key, queues`,
			},
		},
		{
			name: "bad names",
			yaml: "queues:\n  - name: \"has space\"\n  - name: a.b\n  - name: " + strings.Repeat("x", 129) + "\n  - name: \"\"\n",
			want: []string{
				`line 2: bad queue name "has space": use 1-128 bytes of [A-Za-z0-9_-]`,
				`line 3: bad queue name "a.b"`,
				`line 4: bad queue name "xxx`,
				`line 5: bad queue name ""`,
			},
		},
		{
			name: "missing and non-scalar names",
			yaml: "queues:\n  - dedupWindowSeconds: 5\n  - name: [a]\n  - name:\n",
			want: []string{
				"line 2: a queue has no name; add name: <queue>",
				"line 3: name must be a plain string",
				"line 4: a queue has no name",
			},
		},
		{
			name: "values",
			yaml: "queues:\n  - name: a\n    dedupWindowSeconds: -1\n    retentionSeconds: 1.5\n  - name: b\n    dedupWindowSeconds: 10m\n    retentionSeconds: 2147483648\n  - name: c\n    dedupWindowSeconds:\n    retentionSeconds: [1]\n  - name: d\n    retentionSeconds: 99999999999999999999\n  - name: e\n    onConflict: warn\n  - name: f\n    onConflict: 1\n",
			want: []string{
				`line 3: queue "a": dedupWindowSeconds is -1: must be 0 or more`,
				`line 4: queue "a": retentionSeconds is 1.5: must be a whole number of seconds`,
				`line 6: queue "b": dedupWindowSeconds is "10m": the manifest takes whole seconds as on the wire`,
				`line 7: queue "b": retentionSeconds is 2147483648: at most 2147483647`,
				`line 9: queue "c": dedupWindowSeconds has no value`,
				`line 10: queue "c": retentionSeconds must be a whole number of seconds, not a list or mapping`,
				`line 12: queue "d": retentionSeconds is 99999999999999999999: at most 2147483647`,
				`line 14: queue "e": onConflict is warn: one of ignore, flag, reject`,
				`line 16: queue "f": onConflict is 1: one of ignore, flag, reject`,
			},
		},
		{
			name: "retry delays",
			yaml: "queues:\n  - name: a\n    retryDelayMs: 86400001\n    retryBackoffMs: 1000\n  - name: b\n    retryBackoffMs: [1000, -1]\n  - name: c\n    retryBackoffMs: [1s]\n  - name: d\n    retryBackoffMs: [" + strings.Repeat("1, ", 64) + "1]\n",
			want: []string{
				`line 3: queue "a": retryDelayMs is 86400001: at most 86400000`,
				`line 4: queue "a": retryBackoffMs must be a list of whole numbers of milliseconds, e.g. [1000, 5000, 30000]; [] for none`,
				`line 6: queue "b": retryBackoffMs entry 1 is -1: must be 0 or more`,
				`line 8: queue "c": retryBackoffMs entry 0 is "1s": the manifest takes whole milliseconds as on the wire, e.g. 600000 for 10 minutes`,
				`line 10: queue "d": retryBackoffMs has 65 entries: at most 64`,
			},
		},
		{
			name: "duplicates, also across documents",
			yaml: "queues:\n  - name: a\n  - name: b\n  - name: a\n---\nqueues:\n  - name: b\n",
			want: []string{
				`line 4: queue "a" is named twice (first at line 2)`,
				`line 7: queue "b" is named twice (first at line 3)`,
			},
		},
		{
			name: "wrong shapes",
			yaml: "queues: payments\n",
			want: []string{"line 1: cannot unmarshal !!str `payments` into a list of queues"},
		},
		{
			name: "not a mapping",
			yaml: "- name: a\n",
			want: []string{"line 1: cannot unmarshal !!seq into a manifest (a mapping with queues: …)"},
		},
		{
			name: "syntax error",
			yaml: "queues:\n - name: a\n  x: 1\n",
			want: []string{"did not find expected '-' indicator"}, // the YAML parser's line
		},
		{
			name: "empty",
			yaml: "# nothing\n",
			want: []string{"it names no queues; write e.g."},
		},
		{
			name: "no queues in a list",
			yaml: "queues: []\n",
			want: []string{"it names no queues"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			specs, err := Parse("m.yaml", []byte(c.yaml))
			if err == nil {
				t.Fatalf("no error; specs %+v", specs)
			}
			var me *Error
			if !errors.As(err, &me) {
				t.Errorf("error %T, want a *manifest.Error", err)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "m.yaml is not a valid manifest; nothing was sent. Fix:") {
				t.Errorf("message does not start with the file: %s", msg)
			}
			rest := msg
			for _, w := range c.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("message lacks %q (in order):\n%s", w, msg)
				}
				rest = rest[i+len(w):]
			}
			if n := strings.Count(msg, "\n  line "); c.want[0][:4] == "line" && n != len(c.want) {
				t.Errorf("%d errors reported, want %d:\n%s", n, len(c.want), msg)
			}
		})
	}
}

// TestExampleManifests keeps testdata/manifests honest: the valid ones
// parse, invalid.yaml fails on exactly the lines it marks.
func TestExampleManifests(t *testing.T) {
	t.Parallel()
	for _, f := range []string{"queues.yaml", "queues-edited.yaml", "multi-document.yaml"} {
		data, err := os.ReadFile("../../../testdata/manifests/" + f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Parse(f, data); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	data, err := os.ReadFile("../../../testdata/manifests/invalid.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Parse("invalid.yaml", data)
	if err == nil {
		t.Fatal("invalid.yaml parsed")
	}
	marked := regexp.MustCompile(`error \((line \d+)\)`).FindAllStringSubmatch(string(data), -1)
	for _, m := range marked {
		if !strings.Contains(err.Error(), "\n  "+m[1]+": ") {
			t.Errorf("no error at %s:\n%v", m[1], err)
		}
	}
	if got := strings.Count(err.Error(), "\n  line "); got != len(marked) {
		t.Errorf("%d errors, %d marked:\n%v", got, len(marked), err)
	}
}
