package verify

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/queengate/queengate/model"
)

// failoverFixture is the log fixture after an asynchronous failover that
// lost d and e (offsets 3 and 4): the new primary stored x and y at those
// offsets again. Every answer of the fixture came before the promotion,
// x's and y's after it.
func failoverFixture(t *testing.T) (*logFixture, Failover) {
	f := newLogFixture(t)
	for _, table := range []string{"log_segments", "log_txns"} {
		f.exec(t, "DELETE FROM queen."+table+" WHERE partition_id = $1 AND base_offset = 3", f.pid)
	}
	f.exec(t, "UPDATE queen.log_partitions SET last_offset = 2 WHERE id = $1", f.pid) // the allocator is lost too
	kept, err := LogEnds(context.Background(), f.url, fixtureQueue)
	if err != nil {
		t.Fatal(err)
	}
	if kept["p"] != 3 {
		t.Fatalf("LogEnds %v after the loss, want p: 3", kept)
	}
	stopped := time.Now()
	fo := Failover{Stopping: stopped, Stopped: stopped, Promoted: stopped.Add(time.Second), Kept: kept}
	res := f.push(t, "x", "y")
	for k, id := range []string{"x", "y"} {
		off := res.BaseOffset + int64(k)
		f.sent = append(f.sent, Sent{Partition: "p", ID: id, Data: dataOf(id)})
		f.answers = append(f.answers, Answer{Partition: "p", ID: id, Status: "queued", Offset: off,
			MessageID: model.MessageID(f.pid, off), Arrived: fo.Promoted.Add(time.Millisecond)})
	}
	return f, fo
}

// TestVerifyFailoversCountsLosses: what an asynchronous failover lost is
// counted, and the offsets given out again are reported; the strict
// verifier calls the same run a violation.
func TestVerifyFailoversCountsLosses(t *testing.T) {
	t.Parallel()
	f, fo := failoverFixture(t)
	got, err := VerifyFailovers(context.Background(), f.url, fixtureQueue, Recorded{f.sent, f.answers}, nil, []Failover{fo}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Violations() != 0 {
		t.Errorf("%d violations, want none: %+v", got.Violations(), got)
	}
	want := FailoverFindings{Failovers: 1, Lost: 2, LostAnswers: 2, Reused: 2}
	if got.Failover == nil || *got.Failover != want {
		t.Errorf("failover findings %+v, want %+v", got.Failover, want)
	}
	strict, err := Verify(context.Background(), f.url, fixtureQueue, Recorded{f.sent, f.answers}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if strict.Lost != 2 || strict.Failover != nil {
		t.Errorf("strict verifier: lost %d, failover %+v; want 2 lost and no failover findings", strict.Lost, strict.Failover)
	}
}

// TestVerifyFailoversJudgesWhatNoFailoverExplains: a duplicate answered
// after the failover for a message the failover lost, and answers
// naming offsets no later failover cut, are violations.
func TestVerifyFailoversJudgesWhatNoFailoverExplains(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		plant func(f *logFixture, fo *Failover)
		want  int64
	}{
		{"duplicate after the failover", func(f *logFixture, fo *Failover) {
			f.answers = append(f.answers, Answer{Partition: "p", ID: "d", Status: "duplicate", Offset: 3,
				MessageID: model.MessageID(f.pid, 3), Arrived: fo.Promoted.Add(time.Millisecond)})
		}, 1},
		{"failover before the answers", func(f *logFixture, fo *Failover) {
			fo.Promoted = time.Time{}.Add(-time.Hour) // before every answer of the fixture (their times are zero)
		}, 2},
		{"standby kept the offsets", func(_ *logFixture, fo *Failover) {
			fo.Kept = map[string]int64{"p": 5}
		}, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f, fo := failoverFixture(t)
			c.plant(f, &fo)
			got, err := VerifyFailovers(context.Background(), f.url, fixtureQueue, Recorded{f.sent, f.answers}, nil, []Failover{fo}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got.Vanished != c.want || got.Violations() != c.want {
				t.Errorf("vanished %d, violations %d, want %d: %+v", got.Vanished, got.Violations(), c.want, got)
			}
		})
	}
}

// TestLossModelAcks: an ack is explained as lost only by a failover
// whose old primary died before the pop and whose standby took over after
// the ack's answer; a lease only by one between the two pops.
func TestLossModelAcks(t *testing.T) {
	t.Parallel()
	t0 := time.Now()
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	m := lossModel{failovers: []Failover{{Stopping: at(10), Stopped: at(10), Promoted: at(12)}}}
	for _, c := range []struct {
		answered, asked int
		lost            bool
	}{{5, 15, true}, {11, 15, true}, {5, 9, false}, {13, 15, false}} {
		if got := m.ackLost(at(c.answered), at(c.asked)); got != c.lost {
			t.Errorf("ack answered at %d, pop sent at %d: lost %v, want %v", c.answered, c.asked, got, c.lost)
		}
	}
	if (lossModel{}).ackLost(at(5), at(15)) {
		t.Error("no failovers explain a lost ack")
	}
	for _, c := range []struct {
		firstAsked, secondGranted int
		lost                      bool
	}{{5, 15, true}, {5, 11, true}, {11, 15, false}, {5, 9, false}} {
		first := Lease{Asked: at(c.firstAsked), Granted: at(c.firstAsked)}
		second := Lease{Asked: at(c.secondGranted), Granted: at(c.secondGranted)}
		if got := m.leaseLost(second, first); got != c.lost {
			t.Errorf("lease asked at %d, another granted at %d: lost %v, want %v", c.firstAsked, c.secondGranted, got, c.lost)
		}
	}
}

// TestVerifyFailoversJudgesReports: an answer naming an offset the
// failover cut, now holding another message, must be among the messageIds
// the gateways reported lost, unless a journal's worth of answers came
// after it before the promotion or a report named only its first ids.
func TestVerifyFailoversJudgesReports(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		reported   []string // of the lost d and e
		journal    int
		unnamed    int64
		unreported int64
		beyond     int64
	}{
		{"both reported", []string{"d", "e"}, 1 << 18, 0, 0, 0},
		{"e not reported", []string{"d"}, 1 << 18, 0, 1, 0},
		{"none reported", nil, 1 << 18, 0, 2, 0},
		// Two answers came after d's before the promotion, one after e's.
		{"d older than a journal of 2", nil, 2, 0, 1, 1},
		{"a report named none of its 2", nil, 1 << 18, 2, 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f, fo := failoverFixture(t)
			for i := range f.answers {
				if f.answers[i].Arrived.IsZero() { // a..e, a's duplicate: in order, before the stop
					f.answers[i].Arrived = fo.Stopping.Add(time.Duration(i-10) * time.Millisecond)
				}
			}
			offsets := map[string]int64{"d": 3, "e": 4}
			rep := &ReportedLost{IDs: map[string]bool{}, Journal: c.journal, Unnamed: c.unnamed, Count: c.unnamed}
			for _, id := range c.reported {
				rep.IDs[model.MessageID(f.pid, offsets[id])] = true
				rep.Count++
			}
			got, err := VerifyFailovers(context.Background(), f.url, fixtureQueue, Recorded{f.sent, f.answers}, nil, []Failover{fo}, rep)
			if err != nil {
				t.Fatal(err)
			}
			if got.Unreported != c.unreported || got.Violations() != c.unreported {
				t.Errorf("unreported %d, violations %d, want %d: %+v", got.Unreported, got.Violations(), c.unreported, got)
			}
			want := FailoverFindings{Failovers: 1, Lost: 2, LostAnswers: 2, Reused: 2, Reported: rep.Count, ReportedIDs: int64(len(c.reported)),
				LostIDs: 2, BeyondJournal: c.beyond, InUnnamedReports: min(c.unnamed, 2-c.beyond)}
			if *got.Failover != want {
				t.Errorf("failover findings %+v, want %+v", *got.Failover, want)
			}
		})
	}
}

// TestReadReportedLost reads the gateways' reports from their JSON logs,
// among other lines.
func TestReadReportedLost(t *testing.T) {
	t.Parallel()
	gateway0 := `{"level":"info","message":"serving"}
not JSON at all
{"level":"error","lost":3,"message_ids":["00000000-0000-0001-0000-000000000005","00000000-0000-0001-0000-000000000006"],"time":"2026-12-01T23:00:00Z","message":"acknowledged messages PostgreSQL lacks after it changed: lost to asynchronous replication (or to the restore)"}
`
	gateway1 := `{"level":"error","acknowledged":12,"message":"could not check which acknowledged messages PostgreSQL lacks after it changed"}
{"level":"error","lost":1,"message_ids":["00000000-0000-0002-0000-000000000000"],"message":"acknowledged messages PostgreSQL lacks after it changed: lost to asynchronous replication (or to the restore)"}
`
	got, err := ReadReportedLost(100, strings.NewReader(gateway0), strings.NewReader(gateway1))
	if err != nil {
		t.Fatal(err)
	}
	want := &ReportedLost{IDs: map[string]bool{"00000000-0000-0001-0000-000000000005": true, "00000000-0000-0001-0000-000000000006": true,
		"00000000-0000-0002-0000-000000000000": true}, Count: 4, Unnamed: 1, Unchecked: 1, Journal: 100}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("read %+v, want %+v", got, want)
	}
}
