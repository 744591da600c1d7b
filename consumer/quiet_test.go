package consumer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/prometheus/client_golang/prometheus"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/consumer"
	"github.com/queengate/queengate/internal/checkfor"
	"github.com/queengate/queengate/internal/gatewaytest"
	"github.com/queengate/queengate/internal/obstest"
)

// A healthy consumer that stops at MaxMessages costs the gateway no
// refused or failed request: it renews no lease its ack ended (a renewal
// sent is answered before the ack goes), and sends no release for a
// lease the last ack ended. Each batch's handler waits until the batch's
// renewal is on its way and then takes no time: the ack follows the
// renewal at once, as with queenctl consume's printing.
func TestConsumeToMaxMessagesCostsNoRefusedRequest(t *testing.T) {
	t.Parallel()
	r := gatewaytest.Start(t, "")
	pushTo(t, r, 100, "p1", "p2", "p3")
	requests := countRequests(t, r, "consume.>")
	renewals := renewalsSeen(t, r)
	var unsettled atomic.Int32
	batches := map[string]int{} // by partition; a partition is handled by one worker at a time
	var mu sync.Mutex
	err := consumer.Run(t.Context(), r.Client, r.Queue, "g", consumer.Options{MaxMessages: 250, Max: 10, Concurrency: 2, Wait: time.Second,
		OnError: func(err error) { t.Errorf("OnError: %v", err) },
		OnAck: func(_ string, a queengate.AckAnswer) {
			if !a.LeaseEnded {
				unsettled.Add(1)
			}
		}},
		func(ctx context.Context, m queengate.Delivery) error {
			if m.Offset%10 != 0 { // batches of 10 from offset 0
				return nil
			}
			p := consumer.PartitionOf(ctx)
			mu.Lock()
			batches[p]++
			n := batches[p]
			mu.Unlock()
			checkfor.Check(t, 10*time.Second, checkfor.Cond("the batch's renewal sent", func() bool { return renewals(p) >= n }))
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if unsettled.Load() != 0 {
		t.Errorf("%d acks left their lease running", unsettled.Load())
	}
	sent := requests()
	checkfor.Check(t, 10*time.Second, checkfor.Cond(fmt.Sprintf("the %d consuming requests recorded", sent), func() bool {
		return consumeRequests(t, r.Reg, "") == float64(sent)
	}))
	if n := consumeRequests(t, r.Reg, "ok"); n != float64(sent) {
		t.Errorf("%d of %d consuming requests answered ok; by endpoint and result: %v", int(n), sent, requestsByResult(t, r.Reg))
	}
	if n := obstest.MetricValue(t, r.Reg, "queengate_group_lease_renewals_total", map[string]string{"result": "notHeld"}); n != 0 {
		t.Errorf("%v renewals answered notHeld", n)
	}
	if n := obstest.MetricValue(t, r.Reg, "queengate_group_lease_renewals_total", map[string]string{"result": "renewed"}); n == 0 {
		t.Error("no renewal: the batches' deliveries were never confirmed")
	}
	for _, e := range microStats(t, r).Endpoints {
		if e.NumErrors != 0 {
			t.Errorf("micro stats: %s: %d errors (last %q)", e.Name, e.NumErrors, e.LastError)
		}
	}
}

// countRequests counts the requests published on the client's subjects
// under pattern (e.g. "consume.>"); the function it returns says how
// many were seen, once every request published so far is in.
func countRequests(t *testing.T, r *gatewaytest.Running, pattern string) func() int {
	t.Helper()
	watcher := r.ClientConn(t)
	var n atomic.Int32
	if _, err := watcher.Subscribe(r.Client.Subjects().Prefix+"."+pattern, func(*nats.Msg) { n.Add(1) }); err != nil {
		t.Fatal(err)
	}
	if err := watcher.Flush(); err != nil { // subscribed before the first request
		t.Fatal(err)
	}
	return func() int {
		if err := watcher.Flush(); err != nil { // what was routed to it before is in
			t.Fatal(err)
		}
		return int(n.Load())
	}
}

// renewalsSeen counts the renewals published per partition of r's queue.
func renewalsSeen(t *testing.T, r *gatewaytest.Running) func(partition string) int {
	t.Helper()
	watcher := r.ClientConn(t)
	var mu sync.Mutex
	seen := map[string]int{}
	if _, err := watcher.Subscribe(r.Client.Subjects().Renew(r.Queue, "*"), func(m *nats.Msg) {
		mu.Lock()
		defer mu.Unlock()
		seen[m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]]++
	}); err != nil {
		t.Fatal(err)
	}
	if err := watcher.Flush(); err != nil {
		t.Fatal(err)
	}
	return func(partition string) int {
		mu.Lock()
		defer mu.Unlock()
		return seen[partition]
	}
}

// consumeRequests is how many consuming requests the gateway recorded
// in queengate_request_duration_seconds with result ("": any).
func consumeRequests(t *testing.T, reg *prometheus.Registry, result string) float64 {
	var n float64
	for k, v := range requestsByResult(t, reg) {
		endpoint, res, _ := strings.Cut(k, " ")
		if strings.HasPrefix(endpoint, "consume-") && (result == "" || res == result) {
			n += v
		}
	}
	return n
}

// requestsByResult is queengate_request_duration_seconds' sample count
// per "<endpoint> <result>".
func requestsByResult(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "queengate_request_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			out[labels["endpoint"]+" "+labels["result"]] += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return out
}

// microStats is the gateway's answer to $SRV.STATS.
func microStats(t *testing.T, r *gatewaytest.Running) micro.Stats {
	t.Helper()
	m, err := r.ClientConn(t).Request("$SRV.STATS", nil, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var st micro.Stats
	if err := json.Unmarshal(m.Data, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// A consumer whose lease was lost mid-batch (released by another client)
// and that stops at MaxMessages acknowledges what it handled (each item
// answered leaseNotHeld) and sends no release of its own for that lease:
// the ack said it is not held, and a release would be refused.
func TestConsumeReleasesNoLeaseItKnowsLost(t *testing.T) {
	t.Parallel()
	r := gatewaytest.Start(t, "")
	pushN(t, r, 3)
	other, err := queengate.NewClient(r.ClientConn(t))
	if err != nil {
		t.Fatal(err)
	}
	releases := countRequests(t, r, "consume.release.>")
	var results []string
	released := false
	err = consumer.Run(t.Context(), r.Client, r.Queue, "g", consumer.Options{Max: 3, MaxMessages: 3, Wait: time.Second,
		OnAck: func(_ string, a queengate.AckAnswer) {
			for _, it := range a.Items {
				results = append(results, it.Result)
			}
		}},
		func(context.Context, queengate.Delivery) error {
			if !released {
				released = true
				if _, err := other.Release(t.Context(), r.Queue, "p", queengate.LeaseRequest{Group: "g", LeaseID: leaseOf(t, r, "g")}); err != nil {
					t.Error(err)
				}
			}
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"leaseNotHeld", "leaseNotHeld", "leaseNotHeld"}; !slices.Equal(results, want) {
		t.Errorf("ack results %v, want %v", results, want)
	}
	if n := releases(); n != 1 {
		t.Errorf("%d releases sent, want 1 (the other client's)", n)
	}
}
