package manifest

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/queengate/queengate/internal/ctl/queueopt"
)

func ptr(v int64) *queueopt.Value { o := queueopt.Seconds(v); return &o }

// opts makes an options map of whole seconds.
func opts(m map[string]int64) map[string]queueopt.Value {
	out := make(map[string]queueopt.Value, len(m)+1)
	for k, v := range m {
		out[k] = queueopt.Seconds(v)
	}
	return out
}

// live is a gateway's options: whole seconds, and onConflict at its default.
func live(m map[string]int64) map[string]queueopt.Value {
	out := opts(m)
	out["onConflict"] = queueopt.Word("ignore")
	out["maxAttempts"] = queueopt.Count(5)
	out["retainUntil"] = queueopt.Word("age")
	out["retryDelayMs"] = queueopt.Count(0)
	out["retryBackoffMs"] = queueopt.List()
	out["maxAckPending"] = queueopt.Count(0)
	out["groupIdleSeconds"] = queueopt.Seconds(0)
	out["maxUnheardDeliveries"] = queueopt.Count(3)
	return out
}

func wordPtr(w string) *queueopt.Value { o := queueopt.Word(w); return &o }

func listPtr(ms ...int64) *queueopt.Value { o := queueopt.List(ms...); return &o }

func TestDiffQueue(t *testing.T) {
	t.Parallel()
	spec := Queue{Name: "payments", Options: opts(map[string]int64{"dedupWindowSeconds": 600})}
	cases := []struct {
		name    string
		spec    *Queue // nil: spec
		current *queueopt.Config
		want    QueueDiff
	}{
		{
			name: "create lists every option, defaults marked",
			want: QueueDiff{Queue: "payments", Action: "create", Changes: []OptionChange{
				{Option: "dedupWindowSeconds", Wanted: ptr(600)},
				{Option: "retentionSeconds", Wanted: ptr(0), Default: true},
				{Option: "onConflict", Wanted: wordPtr("ignore"), Default: true},
				{Option: "maxAttempts", Wanted: ptr(5), Default: true},
				{Option: "retainUntil", Wanted: wordPtr("age"), Default: true},
				{Option: "retryDelayMs", Wanted: ptr(0), Default: true},
				{Option: "retryBackoffMs", Wanted: listPtr(), Default: true},
				{Option: "maxAckPending", Wanted: ptr(0), Default: true},
				{Option: "groupIdleSeconds", Wanted: ptr(0), Default: true},
				{Option: "maxUnheardDeliveries", Wanted: ptr(3), Default: true},
			}},
		},
		{
			name:    "unchanged",
			current: &queueopt.Config{Options: live(map[string]int64{"dedupWindowSeconds": 600, "retentionSeconds": 0})},
			want:    QueueDiff{Queue: "payments", Action: "unchanged"},
		},
		{
			name:    "replace resets an omitted option",
			current: &queueopt.Config{Options: live(map[string]int64{"dedupWindowSeconds": 3600, "retentionSeconds": 86400})},
			want: QueueDiff{Queue: "payments", Action: "update", Changes: []OptionChange{
				{Option: "dedupWindowSeconds", Current: ptr(3600), Wanted: ptr(600)},
				{Option: "retentionSeconds", Current: ptr(86400), Wanted: ptr(0), Default: true},
			}},
		},
		{
			name: "a backoff list changed",
			spec: &Queue{Name: "payments", Options: map[string]queueopt.Value{"dedupWindowSeconds": queueopt.Seconds(600),
				"retryBackoffMs": queueopt.List(1000, 5000)}},
			current: &queueopt.Config{Options: live(map[string]int64{"dedupWindowSeconds": 600, "retentionSeconds": 0})},
			want: QueueDiff{Queue: "payments", Action: "update", Changes: []OptionChange{
				{Option: "retryBackoffMs", Current: listPtr(), Wanted: listPtr(1000, 5000)},
			}},
		},
		{
			name:    "an option the gateway lacks, and one queenctl does not know",
			current: &queueopt.Config{Options: live(map[string]int64{"dedupWindowSeconds": 600, "futureSeconds": 5})},
			want: QueueDiff{Queue: "payments", Action: "update", Changes: []OptionChange{
				{Option: "retentionSeconds", Wanted: ptr(0), Default: true},
				{Option: "futureSeconds", Current: ptr(5), Default: true},
			}},
		},
	}
	for _, c := range cases {
		s := spec
		if c.spec != nil {
			s = *c.spec
		}
		if got := DiffQueue(s, c.current); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s:\ngot  %+v\nwant %+v", c.name, got, c.want)
		}
	}
}

func TestRenderDiff(t *testing.T) {
	t.Parallel()
	diffs := []QueueDiff{
		DiffQueue(Queue{Name: "payments", Options: opts(map[string]int64{"dedupWindowSeconds": 600, "retentionSeconds": 86400})}, nil),
		DiffQueue(Queue{Name: "audit", Options: opts(map[string]int64{"dedupWindowSeconds": 0})},
			&queueopt.Config{Options: live(map[string]int64{"dedupWindowSeconds": 3600, "retentionSeconds": 604800, "futureSeconds": 5})}),
		DiffQueue(Queue{Name: "billing", Options: opts(map[string]int64{})},
			&queueopt.Config{Options: live(map[string]int64{"dedupWindowSeconds": 3600, "retentionSeconds": 0})}),
		DiffQueue(Queue{Name: "ledger", Options: map[string]queueopt.Value{"onConflict": queueopt.Word("reject")}},
			&queueopt.Config{Options: live(map[string]int64{"dedupWindowSeconds": 3600, "retentionSeconds": 0})}),
	}
	var buf bytes.Buffer
	RenderDiff(&buf, diffs)
	want := `payments: create
  dedupWindowSeconds: 600 (10m)
  retentionSeconds: 86400 (1d)
  onConflict: ignore, the default
  maxAttempts: 5, the default
  retainUntil: age, the default
  retryDelayMs: 0 (at once), the default
  retryBackoffMs: [] (none), the default
  maxAckPending: 0 (no limit), the default
  groupIdleSeconds: 0 (groups always hold), the default
  maxUnheardDeliveries: 3, the default
audit: update
  dedupWindowSeconds: 3600 (1h) → 0 (off)
  retentionSeconds: 604800 (7d) → 0 (keep forever), the default: the manifest omits it
  futureSeconds: 5 (5s) → its default (queenctl does not know this queueopt.Option)
billing: unchanged
ledger: update
  onConflict: ignore → reject
dry run: 1 to create, 2 to update, 1 unchanged; nothing was changed
`
	if buf.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", buf.String(), want)
	}
}
