package main

import (
	"bytes"
	"context"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/queengate/queengate/internal/chaos/world"
	"github.com/queengate/queengate/internal/gatewaybin"
)

// TestShortProfile runs every fault kind once against three gateways
// built from this tree, a three-server NATS cluster and PostgreSQL behind
// a proxy, and checks the verifier's verdict: nothing acknowledged lost,
// doubled or misplaced, every message in the end answered as stored. The
// gateway faults strike a gateway right after its tail served a cycle
// (kill -9, SIGTERM and SIGSTOP in the middle of the cycles it serves
// from memory). The per-fault gaps are logged, not asserted (a shared
// machine's timing).
//
// It runs alone: the heaviest world of the package (three gateways, three
// NATS servers, 22 consumers), whose faults on a machine also running
// another world were once followed by a gateway not ready within a
// minute. The lighter failover and pipeline worlds run side by side
// after it.
func TestShortProfile(t *testing.T) {
	out := runJudged(t, "short")
	if len(out.Faults) != len(allFaults) {
		t.Errorf("%d fault kinds done, want each of the %d once", len(out.Faults), len(allFaults))
	}
	struckServingTails(t, out, killGateway, termGateway, pauseGateway)
	v := out.Verifier
	if v.Sent == 0 || v.Answered != v.Sent || out.Unanswered != 0 {
		t.Errorf("%d ids sent, %d answered as stored, %d never: every message must end answered", v.Sent, v.Answered, out.Unanswered)
	}
	if v.Consume == nil {
		t.Fatal("no consumer findings: the short profile runs consumers")
	}
	if n := v.Consume.Unsettled(); n != 0 {
		t.Errorf("%d messages past some group's cursor at the end: every group must end having consumed everything", n)
	}
	for _, g := range v.Consume.Groups {
		if g.Messages == 0 {
			t.Errorf("group %s consumed nothing", g.Group)
		}
	}
	if poisoned := v.Consume.Groups[len(v.Consume.Groups)-1]; poisoned.Poison == 0 {
		t.Errorf("group %s dead-lettered no message its consumers died on: the history has none", poisoned.Group)
	}
}

// TestFailoverShortProfile kills the primary (kill -9) once under load,
// promotes its synchronous standby (remote_apply) and re-attaches the old
// primary with pg_rewind, while gateways follow with a multi-host URL:
// the strict verifier must find nothing acknowledged lost, doubled or
// misplaced and no ack undone, and every message must end answered. The
// time without answers is logged, not asserted. The primary is killed
// right after a gateway's tail served a cycle: the failover strikes
// serving tails, which must drop what they hold of the old primary's log.
func TestFailoverShortProfile(t *testing.T) {
	t.Parallel()
	out := runJudged(t, "failover-short")
	if len(out.Failovers) != 1 || out.Failovers[0].Attached.IsZero() {
		t.Fatalf("failovers %+v, want one, the old primary re-attached", out.Failovers)
	}
	struckServingTails(t, out, failoverKill)
	v := out.Verifier
	if v.Failover != nil {
		t.Error("synchronous replication: the verifier must be the strict one, explaining no loss")
	}
	if v.Sent == 0 || v.Answered != v.Sent || out.Unanswered != 0 {
		t.Errorf("%d ids sent, %d answered as stored, %d never: every message must end answered", v.Sent, v.Answered, out.Unanswered)
	}
	if v.Consume == nil || v.Consume.Unsettled() != 0 {
		t.Errorf("consumer findings %+v: every group must end having consumed everything", v.Consume)
	}
}

// struckServingTails fails the test unless each fault of the kinds
// struck a tail that was serving: its gateway's served cycles rose just
// before (a gateway fault: the target's).
func struckServingTails(t *testing.T, out *outcome, kinds ...faultKind) {
	t.Helper()
	for _, k := range kinds {
		i := slices.IndexFunc(out.Faults, func(f faultFigures) bool { return f.Kind == k })
		if i < 0 {
			t.Errorf("no %s done", k)
			continue
		}
		f := out.Faults[i]
		if f.TailIdle > 0 || len(f.TailServed) != f.Count {
			t.Errorf("%s: %d of %d struck a gateway whose tail was seen serving cycles (%d waited in vain): "+
				"each must strike in the middle of cycles served from a tail", k, len(f.TailServed), f.Count, f.TailIdle)
		}
	}
}

// runJudged runs the named profile with a gateway built from this tree,
// at half its offered load (the same faults, against half the messages:
// go tool task chaos runs it whole), logs its report and reports the
// judge's verdict.
func runJudged(t *testing.T, name string) *outcome {
	dir, bin := buildGateway(t)
	p := profiles[name]
	p.Load.Rate /= 2
	out, err := runProfile(context.Background(), p, dir, bin, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	o := options{profile: p, minRatio: 0.95}
	t.Log("\n" + markdown(o, out))
	if err := judge(o, out); err != nil {
		t.Error(err)
	}
	return out
}

// buildGateway makes the test a folder of its own, removed when the
// test ends unless it failed, and returns it with the queengate binary built from this
// tree (once for all the package's tests: removeGateway removes it).
func buildGateway(t *testing.T) (dir, bin string) {
	// Not t.TempDir: its parent is private, and PostgreSQL runs as its
	// own user.
	dir, err := os.MkdirTemp("", "queenchaos-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("data and logs kept in %s", dir)
			return
		}
		_ = os.RemoveAll(dir)
	})
	gateway.once.Do(func() {
		if gateway.dir, gateway.err = os.MkdirTemp("", "queenchaos-gateway-"); gateway.err != nil {
			return
		}
		// One build at a time across the suite's test processes: the
		// others then only link (internal/gatewaybin).
		gateway.bin, gateway.err = gatewaybin.Build(gateway.dir)
	})
	if gateway.err != nil {
		t.Fatal(gateway.err)
	}
	return dir, gateway.bin
}

// gateway is the queengate binary the package's tests share.
var gateway struct {
	once     sync.Once
	dir, bin string
	err      error
}

// removeGateway removes the shared binary once the tests are done.
func removeGateway() {
	if gateway.dir != "" {
		_ = os.RemoveAll(gateway.dir)
	}
}

// TestGapsAndFigures: the per-fault figures come from the events in the
// fault's window only.
func TestGapsAndFigures(t *testing.T) {
	t.Parallel()
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	events := []event{
		{at: at(-500), producer: 0, kind: answeredOK, n: 1}, // before the window
		{at: at(100), producer: 0, kind: answeredOK, n: 1},
		{at: at(200), producer: 1, kind: failedNotStored, n: 3, wait: 50 * time.Millisecond},
		{at: at(900), producer: 1, kind: answeredOK, n: 1},
		{at: at(1000), producer: 0, kind: failedUnknown, n: 1, wait: 700 * time.Millisecond},
		{at: at(1100), producer: 0, kind: timedOut, n: 2, wait: 2 * time.Second},
		{at: at(1200), producer: 0, kind: answeredOK, n: 1},
	}
	f := fault{Kind: freezePG, Target: -1, Start: at(0), End: at(1500 - int(afterFault/time.Millisecond))}
	got := figuresByKind([]fault{f}, events, 2)[0]
	want := faultFigures{Kind: freezePG, Count: 1,
		LongestFleetGap:    800 * time.Millisecond,  // 100 → 900
		LongestProducerGap: 1100 * time.Millisecond, // producer 0: 100 → 1200
		MedianProducerGap:  1100 * time.Millisecond, // of 900 (producer 1: 0 → 900) and 1100, the upper
		LongestWait:        700 * time.Millisecond, FailedNotStored: 3, FailedUnknown: 1, Timeouts: 1}
	if got.LongestFleetGap != want.LongestFleetGap || got.LongestProducerGap != want.LongestProducerGap ||
		got.MedianProducerGap != want.MedianProducerGap || got.LongestWait != want.LongestWait ||
		got.FailedNotStored != want.FailedNotStored || got.FailedUnknown != want.FailedUnknown || got.Timeouts != want.Timeouts {
		t.Errorf("figures %+v, want %+v", got, want)
	}
	if s := got.DefiniteShare(); s != 0.75 {
		t.Errorf("definite share %v, want 0.75", s)
	}
}

// TestTailFigures: a kind of fault that watches tails reports the served
// cycles of each instance that struck a serving tail and counts those
// that struck none; one that does not watch reports neither.
func TestTailFigures(t *testing.T) {
	t.Parallel()
	t0 := time.Now()
	faults := []fault{
		{Kind: killGateway, Target: 1, Start: t0, End: t0, Tail: tailSeen{Gateway: 1, Served: 7, Serving: true}},
		{Kind: killGateway, Target: 0, Start: t0, End: t0, Tail: tailSeen{Gateway: 0, Served: 3}},
		{Kind: freezePG, Target: -1, Start: t0, End: t0, Tail: tailSeen{Gateway: -1}},
	}
	got := figuresByKind(faults, nil, 1)
	if kill := got[0]; !slices.Equal(kill.TailServed, []int64{7}) || kill.TailIdle != 1 {
		t.Errorf("kill -9: tail served %v, idle %d; want [7] and 1", kill.TailServed, kill.TailIdle)
	}
	if freeze := got[1]; freeze.TailServed != nil || freeze.TailIdle != 0 || tailCell(freeze) != "—" {
		t.Errorf("freeze: tail served %v, idle %d, cell %q; want none", freeze.TailServed, freeze.TailIdle, tailCell(freeze))
	}
}

// TestPoisons: the poison messages are PoisonEvery/2 past each multiple
// of PoisonEvery, only the first PoisonFirst of them when set.
func TestPoisons(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		first uint32
		want  []uint32
	}{{0, []uint32{500, 1500, 2500}}, {2, []uint32{500, 1500}}} {
		cl := consumeLoad{PoisonEvery: 1000, PoisonFirst: c.first}
		var got []uint32
		for seq := range uint32(3000) {
			if cl.poisons(seq) {
				got = append(got, seq)
			}
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("PoisonFirst %d: poison messages %v, want %v", c.first, got, c.want)
		}
	}
}

func TestOptions(t *testing.T) {
	t.Parallel()
	o, err := parseOptions([]string{"--profile", "long", "--faults", "kill,pg-freeze", "--duration", "30s"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if o.profile.Name != "long" || o.profile.Duration != 30*time.Second || len(o.profile.Faults) != 2 || o.profile.Faults[1] != freezePG {
		t.Errorf("options %+v", o.profile)
	}
	o, err = parseOptions([]string{"--profile", "failover-async", "--faults", "failover-stop"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if !o.profile.Replication.Standby || o.profile.Replication.Sync || len(o.profile.Faults) != 1 || o.profile.Faults[0] != failoverStop {
		t.Errorf("options %+v", o.profile)
	}
	if err := checkFaults(o.profile); err != nil {
		t.Error(err)
	}
	for _, bad := range []profile{{Name: "x", Faults: []faultKind{failoverKill}}, {Name: "y", Faults: []faultKind{freezePG}, Replication: world.Replication{Standby: true}}} {
		if err := checkFaults(bad); err == nil || !strings.Contains(err.Error(), "standby") {
			t.Errorf("profile %s with %v: %v, want the fault refused", bad.Name, bad.Faults, err)
		}
	}
	for _, bad := range [][]string{{"--profile", "nope"}, {"--faults", "kill,meteor"}} {
		if _, err := parseOptions(bad, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), strings.TrimPrefix(bad[1], "kill,")) {
			t.Errorf("%v: %v, want an error naming the bad value", bad, err)
		}
	}
}
