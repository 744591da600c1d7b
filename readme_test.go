package queengate_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/consumer"
	"github.com/queengate/queengate/queengatetest"
)

// TestREADMENamesFilesThatExist: every repository file the README names
// (testdata/…, docs/…) and every file its commands read (< file, -f
// file) is there, relative to the repository's root.
func TestREADMENamesFilesThatExist(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	paths := regexp.MustCompile(`(?:testdata|docs)/[A-Za-z0-9_./-]*[A-Za-z0-9_]`).FindAllString(string(readme), -1)
	for _, m := range regexp.MustCompile(`(?m)^[^|\n]*(?:< |-f )([A-Za-z0-9_./-]+)`).FindAllStringSubmatch(string(readme), -1) {
		paths = append(paths, m[1])
	}
	if len(paths) == 0 {
		t.Fatal("the README names no file under testdata/ or docs/")
	}
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("the README names %s: %v", p, err)
		}
	}
}

// TestREADMETimerExampleIsAhead: a timer the README schedules at a
// written date must not be in the past when a reader tries it.
func TestREADMETimerExampleIsAhead(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`--at\s+"?(\d{4}-\d\d-\d\dT[0-9:.]+(?:Z|[+-]\d\d:\d\d))`).FindAllStringSubmatch(string(readme), -1) {
		at, err := time.Parse(time.RFC3339Nano, m[1])
		if err != nil || !at.After(time.Now().AddDate(1, 0, 0)) {
			t.Errorf("the README schedules a timer --at %s: give a relative time (or a date a year ahead)", m[1])
		}
	}
}

// readmeBefore is the README up to the first line holding marker.
func readmeBefore(t *testing.T, marker string) string {
	t.Helper()
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	before, _, found := strings.Cut(string(readme), marker)
	if !found {
		t.Fatalf("the README has no %q", marker)
	}
	return before
}

// transactionIDsIn are the string literals given to TransactionID in a
// Go file.
func transactionIDsIn(t *testing.T, path string) []string {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range regexp.MustCompile(`TransactionID: "([^"]+)"`).FindAllStringSubmatch(string(src), -1) {
		ids = append(ids, m[1])
	}
	return ids
}

// TestREADMEWalkShowsWhatItSays walks the README in order against a real
// gateway, as a newcomer would: its nats pushes answer what its comments
// say, examples/push (run as the README says) answers queued, then
// duplicate for its retry, and the consume command's group gets exactly
// the --count messages pushed before it. examples/consumer consumes in a
// group of its own, so running it takes nothing from the README's.
func TestREADMEWalkShowsWhatItSays(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a gateway and builds examples/push")
	}
	const consumeMarker = "consume payments --group "
	walk := readmeBefore(t, consumeMarker)
	g := queengatetest.Start(t)
	client := g.Connect(t)
	nc, err := nats.Connect(g.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// The shell pushes, in order: a request answers what the comment
	// under it shows, and "the same command again" answers duplicate.
	pushes := regexp.MustCompile(`nats (req|pub) (queen\.push\.\S+) \\?\s*'([^']*)'`).FindAllStringSubmatch(walk, -1)
	if len(pushes) < 2 {
		t.Fatalf("the README pushes %d times with nats before consuming; want its request and its fire-and-forget", len(pushes))
	}
	for _, p := range pushes {
		for _, want := range []string{"queued", "duplicate"} {
			reply, err := nc.RequestWithContext(ctx, p[2], []byte(p[3]))
			if err != nil {
				t.Fatal(err)
			}
			var answers []queengate.Result
			if err := json.Unmarshal(reply.Data, &answers); err != nil || len(answers) == 0 || string(answers[0].Status) != want {
				t.Errorf("nats %s %s %s: %s; want %s", p[1], p[2], p[3], reply.Data, want)
			}
		}
	}

	// examples/push, run as the README says after them: its first push is
	// new, its retry a duplicate, its publish new.
	out, err := exec.CommandContext(ctx, "go", "run", "./examples/push", "-nats-url", g.ClientURL()).CombinedOutput()
	if err != nil {
		t.Fatalf("go run ./examples/push: %v\n%s", err, out)
	}
	for _, want := range []string{`first \S+ -> queued`, `retry \S+ -> duplicate`, `ack +\S+ -> queued`} {
		if !regexp.MustCompile(want).Match(out) {
			t.Errorf("go run ./examples/push prints\n%s\nwithout a line like %q", out, want)
		}
	}

	// The README's consume: its group gets --count messages, and that is
	// all there is.
	m := regexp.MustCompile(regexp.QuoteMeta(consumeMarker) + `(\S+) --count (\d+)`).FindStringSubmatch(readmeBefore(t, "bin/queenctl get groups"))
	if m == nil {
		t.Fatal("the README's consume command has no --group and --count")
	}
	group, count := m[1], m[2]
	var got int
	consumeCtx, stop := context.WithTimeout(ctx, 20*time.Second) // what is there comes in well under a second
	defer stop()
	err = consumer.Run(consumeCtx, client, "payments", group, consumer.Options{Wait: 200 * time.Millisecond, MaxMessages: atoi(t, count)},
		func(context.Context, queengate.Delivery) error { got++; return nil })
	if err != nil {
		t.Fatalf("consume payments --group %s --count %s: %v after %d messages", group, count, err, got)
	}
	rest, err := client.Pop(ctx, "payments", "", queengate.PopRequest{Group: group})
	if err != nil || len(rest.Messages) != 0 {
		t.Errorf("after the README's --count %s, group %s has %d more messages (%v); want the count to be what was pushed", count, group, len(rest.Messages), err)
	}

	if ours := exampleConsumerGroup(t); ours == group {
		t.Errorf("examples/consumer consumes as group %q, the README's: running it would leave the README's consume nothing", ours)
	}
}

// exampleConsumerGroup is the group examples/consumer consumes as by
// default.
func exampleConsumerGroup(t *testing.T) string {
	t.Helper()
	src, err := os.ReadFile("examples/consumer/main.go")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`flag\.String\("group", "([^"]+)"`).FindSubmatch(src)
	if m == nil {
		t.Fatal("examples/consumer has no -group flag")
	}
	return string(m[1])
}

// TestREADMEShowsExamplesPush: the Go the README shows as examples/push
// pushes what examples/push does.
func TestREADMEShowsExamplesPush(t *testing.T) {
	t.Parallel()
	ids := transactionIDsIn(t, "examples/push/main.go")
	readme := readmeBefore(t, "### Reading back")
	shown := regexp.MustCompile(`TransactionID: "([^"]+)"`).FindAllStringSubmatch(readme, -1)
	if len(shown) == 0 {
		t.Fatal("the README shows no Go push")
	}
	for _, m := range shown {
		if !slices.Contains(ids, m[1]) {
			t.Errorf("the README's Go pushes %q; examples/push pushes %q", m[1], ids)
		}
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
