package main

import (
	"bytes"
	"reflect"
	"testing"
)

func ptr(v int64) *optionValue { o := seconds(v); return &o }

// opts makes an options map of whole seconds.
func opts(m map[string]int64) map[string]optionValue {
	out := make(map[string]optionValue, len(m)+1)
	for k, v := range m {
		out[k] = seconds(v)
	}
	return out
}

// live is a gateway's options: whole seconds, and onConflict at its default.
func live(m map[string]int64) map[string]optionValue {
	out := opts(m)
	out["onConflict"] = word("ignore")
	out["maxAttempts"] = count(5)
	out["retainUntil"] = word("age")
	out["retryDelayMs"] = count(0)
	out["retryBackoffMs"] = list()
	return out
}

func wordPtr(w string) *optionValue { o := word(w); return &o }

func listPtr(ms ...int64) *optionValue { o := list(ms...); return &o }

func TestDiffQueue(t *testing.T) {
	t.Parallel()
	spec := queueSpec{Name: "payments", Options: opts(map[string]int64{"dedupWindowSeconds": 600})}
	cases := []struct {
		name    string
		spec    *queueSpec // nil: spec
		current *queueConfig
		want    queueDiff
	}{
		{
			name: "create lists every option, defaults marked",
			want: queueDiff{Queue: "payments", Action: "create", Changes: []optionChange{
				{Option: "dedupWindowSeconds", Wanted: ptr(600)},
				{Option: "retentionSeconds", Wanted: ptr(0), Default: true},
				{Option: "onConflict", Wanted: wordPtr("ignore"), Default: true},
				{Option: "maxAttempts", Wanted: ptr(5), Default: true},
				{Option: "retainUntil", Wanted: wordPtr("age"), Default: true},
				{Option: "retryDelayMs", Wanted: ptr(0), Default: true},
				{Option: "retryBackoffMs", Wanted: listPtr(), Default: true},
			}},
		},
		{
			name:    "unchanged",
			current: &queueConfig{Options: live(map[string]int64{"dedupWindowSeconds": 600, "retentionSeconds": 0})},
			want:    queueDiff{Queue: "payments", Action: "unchanged"},
		},
		{
			name:    "replace resets an omitted option",
			current: &queueConfig{Options: live(map[string]int64{"dedupWindowSeconds": 3600, "retentionSeconds": 86400})},
			want: queueDiff{Queue: "payments", Action: "update", Changes: []optionChange{
				{Option: "dedupWindowSeconds", Current: ptr(3600), Wanted: ptr(600)},
				{Option: "retentionSeconds", Current: ptr(86400), Wanted: ptr(0), Default: true},
			}},
		},
		{
			name: "a backoff list changed",
			spec: &queueSpec{Name: "payments", Options: map[string]optionValue{"dedupWindowSeconds": seconds(600),
				"retryBackoffMs": list(1000, 5000)}},
			current: &queueConfig{Options: live(map[string]int64{"dedupWindowSeconds": 600, "retentionSeconds": 0})},
			want: queueDiff{Queue: "payments", Action: "update", Changes: []optionChange{
				{Option: "retryBackoffMs", Current: listPtr(), Wanted: listPtr(1000, 5000)},
			}},
		},
		{
			name:    "an option the gateway lacks, and one queenctl does not know",
			current: &queueConfig{Options: live(map[string]int64{"dedupWindowSeconds": 600, "futureSeconds": 5})},
			want: queueDiff{Queue: "payments", Action: "update", Changes: []optionChange{
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
		if got := diffQueue(s, c.current); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s:\ngot  %+v\nwant %+v", c.name, got, c.want)
		}
	}
}

func TestRenderDiff(t *testing.T) {
	t.Parallel()
	diffs := []queueDiff{
		diffQueue(queueSpec{Name: "payments", Options: opts(map[string]int64{"dedupWindowSeconds": 600, "retentionSeconds": 86400})}, nil),
		diffQueue(queueSpec{Name: "audit", Options: opts(map[string]int64{"dedupWindowSeconds": 0})},
			&queueConfig{Options: live(map[string]int64{"dedupWindowSeconds": 3600, "retentionSeconds": 604800, "futureSeconds": 5})}),
		diffQueue(queueSpec{Name: "billing", Options: opts(map[string]int64{})},
			&queueConfig{Options: live(map[string]int64{"dedupWindowSeconds": 3600, "retentionSeconds": 0})}),
		diffQueue(queueSpec{Name: "ledger", Options: map[string]optionValue{"onConflict": word("reject")}},
			&queueConfig{Options: live(map[string]int64{"dedupWindowSeconds": 3600, "retentionSeconds": 0})}),
	}
	var buf bytes.Buffer
	renderDiff(&buf, diffs)
	want := `payments: create
  dedupWindowSeconds: 600 (10m)
  retentionSeconds: 86400 (1d)
  onConflict: ignore, the default
  maxAttempts: 5, the default
  retainUntil: age, the default
  retryDelayMs: 0 (at once), the default
  retryBackoffMs: [] (none), the default
audit: update
  dedupWindowSeconds: 3600 (1h) → 0 (off)
  retentionSeconds: 604800 (7d) → 0 (keep forever), the default: the manifest omits it
  futureSeconds: 5 (5s) → its default (queenctl does not know this option)
billing: unchanged
ledger: update
  onConflict: ignore → reject
dry run: 1 to create, 2 to update, 1 unchanged; nothing was changed
`
	if buf.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", buf.String(), want)
	}
}
