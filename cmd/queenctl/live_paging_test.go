package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	queengate "github.com/queengate/queengate"
)

// TestLivePaging runs a gateway whose embedded NATS carries 64 KiB a
// message, with more queues, partitions and timers than one answer
// lists: get queues, get queue and timer list print every one of them,
// once and in order, over HTTP and over NATS; a timer list short of all
// says more are pending. get groups lists every group with every
// partition, although four groups' partitions take more than one answer.
func TestLivePaging(t *testing.T) {
	t.Parallel()
	conf := filepath.Join(t.TempDir(), "nats.conf")
	if err := os.WriteFile(conf, []byte("max_payload: 65536\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, "QUEEN_NATS_CONFIG="+conf)
	nc, err := nats.Connect(g.natsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if nc.MaxPayload() != 65536 {
		t.Fatalf("the server's max payload is %d, want 65536", nc.MaxPayload())
	}
	client, err := queengate.NewClient(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()

	const queues, partitions, timers = 250, 300, 150 // each over 64 KiB listed
	var queueNames []string
	for i := range queues {
		name := fmt.Sprintf("q%03d-%s", i, strings.Repeat("q", 60))
		queueNames = append(queueNames, name)
		if _, err := client.Configure(ctx, queengate.ConfigureRequest{Queue: name}); err != nil {
			t.Fatal(err)
		}
	}
	var partitionNames []string
	for i := range partitions {
		partitionNames = append(partitionNames, "p"+strconv.Itoa(i))
		if _, err := client.Push(ctx, queueNames[0], partitionNames[i], queengate.Message{Data: []byte("1")}); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(partitionNames)
	var timerIDs []string
	for i := range timers {
		s, err := client.ScheduleTimer(ctx, queueNames[0], "p0", queengate.Timer{
			TransactionID: fmt.Sprintf("%03d-%s", i, strings.Repeat("t", 252)), Delay: time.Hour + time.Duration(i)*time.Second})
		if err != nil {
			t.Fatal(err)
		}
		timerIDs = append(timerIDs, s.TimerID)
	}

	groupNames := []string{"g1", "g2", "g3", "g4"}
	for _, group := range groupNames {
		if _, err := client.Pop(ctx, queueNames[0], "p0", queengate.PopRequest{Group: group, Consumer: "c", Max: 1}); err != nil {
			t.Fatal(err)
		}
	}

	for _, tr := range transports(g) {
		r := ctl(t, "", flags(tr.admin, "get", "groups", queueNames[0], "-o", "json")...)
		r.expect(t, exitOK)
		var listedGroups []string
		for _, gv := range jsonOf[queengate.GroupsAnswer](t, r).Groups {
			listedGroups = append(listedGroups, gv.Group)
			var listed []string
			for _, p := range gv.Partitions {
				listed = append(listed, p.Partition)
			}
			if !slices.Equal(listed, partitionNames) || gv.NextPartition != "" {
				t.Errorf("%s: get groups listed %d partitions of group %s (next %q), want the %d, each once, in order",
					tr.name, len(listed), gv.Group, gv.NextPartition, partitions)
			}
		}
		if !slices.Equal(listedGroups, groupNames) {
			t.Errorf("%s: get groups listed groups %v, want %v", tr.name, listedGroups, groupNames)
		}
		r = ctl(t, "", flags(tr.admin, "get", "groups", queueNames[0])...)
		r.expect(t, exitOK, "g4 ", partitionNames[partitions-1]+" ")
		if strings.Contains(r.stdout, "(all") {
			t.Errorf("%s: get groups printed a group's totals only:\n%s", tr.name, r.stdout)
		}

		r = ctl(t, "", flags(tr.admin, "get", "queues", "-o", "json")...)
		r.expect(t, exitOK)
		var listed []string
		for _, q := range jsonOf[queengate.QueuesAnswer](t, r).Queues {
			listed = append(listed, q.Queue)
		}
		if !slices.Equal(listed, queueNames) {
			t.Errorf("%s: get queues listed %d queues, want the %d, each once, in order", tr.name, len(listed), queues)
		}
		r = ctl(t, "", flags(tr.admin, "get", "queues")...)
		r.expect(t, exitOK, queueNames[0], queueNames[queues-1])

		r = ctl(t, "", flags(tr.admin, "get", "queue", queueNames[0], "-o", "json")...)
		r.expect(t, exitOK)
		q := jsonOf[queengate.QueueAnswer](t, r)
		listed = nil
		for _, p := range q.Partitions {
			listed = append(listed, p.Partition)
		}
		if !slices.Equal(listed, partitionNames) || q.NextPartition != "" {
			t.Errorf("%s: get queue listed %d partitions (next %q), want the %d, each once, in order", tr.name, len(listed), q.NextPartition, partitions)
		}
		ctl(t, "", flags(tr.admin, "get", "queue", queueNames[0])...).expect(t, exitOK, partitionNames[0]+" ", partitionNames[partitions-1]+" ")

		r = ctl(t, "", flags(tr.admin, "timer", "list", "--queue", queueNames[0], "--all", "-o", "json")...)
		r.expect(t, exitOK)
		list := jsonOf[queengate.TimersAnswer](t, r)
		listed = nil
		for _, x := range list.Timers {
			listed = append(listed, x.TimerID)
		}
		if !slices.Equal(listed, timerIDs) || list.Next != nil {
			t.Errorf("%s: timer list --all listed %d timers (next %v), want the %d, each once, due first", tr.name, len(listed), list.Next, timers)
		}
		r = ctl(t, "", flags(tr.admin, "timer", "list", "--queue", queueNames[0], "--limit", "120")...)
		r.expect(t, exitOK, timerIDs[119], "the first 120, due first; more are pending")
		if strings.Contains(r.stdout, timerIDs[120]) {
			t.Errorf("%s: timer list --limit 120 printed the 121st timer", tr.name)
		}
	}
}
