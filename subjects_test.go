package queengate_test

import (
	"os"
	"strings"
	"testing"

	queengate "github.com/queengate/queengate"
)

// TestEveryAPISubjectIsDocumented: docs/protocol.md writes every subject
// of the table, as its template under the default prefix.
func TestEveryAPISubjectIsDocumented(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, a := range queengate.APIs {
		template := a.Template(queengate.DefaultPrefix)
		if seen[template] {
			t.Errorf("%s is in the table twice", template)
		}
		seen[template] = true
		if !strings.Contains(string(doc), "`"+template+"`") {
			t.Errorf("docs/protocol.md does not write `%s`", template)
		}
	}
}

// TestSubjectsFollowTheTable: each subject a client builds is its API's
// template with the names filled in.
func TestSubjectsFollowTheTable(t *testing.T) {
	t.Parallel()
	s := queengate.Subjects{Prefix: "acme.queen"}
	fill := strings.NewReplacer("<queue>[.<partition>]", "orders.eu", // first: the replacer tries these in order
		"<queue>", "orders", "<partition>", "eu", "<group>", "billing")
	for a, got := range map[*queengate.API]string{
		&queengate.APIPush:           s.Push("orders", "eu"),
		&queengate.APIPushAnswer:     s.PushAnswer("orders", "eu"),
		&queengate.APITimer:          s.Timer("orders", "eu"),
		&queengate.APITimerCancel:    s.TimerCancel(),
		&queengate.APITimerList:      s.TimerList(),
		&queengate.APIRead:           s.Read("orders", "eu"),
		&queengate.APIMessageGet:     s.MessageGet(),
		&queengate.APIExplain:        s.Explain("orders", "eu"),
		&queengate.APIPop:            s.Pop("orders", "eu"),
		&queengate.APIConsumeAck:     s.ConsumeAck("orders", "eu"),
		&queengate.APIConsumeAckPush: s.ConsumeAckPush("orders", "eu"),
		&queengate.APIRenew:          s.Renew("orders", "eu"),
		&queengate.APIRelease:        s.Release("orders", "eu"),
		&queengate.APIGroups:         s.Groups("orders"),
		&queengate.APIGroupCreate:    s.GroupCreate("orders", "billing"),
		&queengate.APIGroupSeek:      s.GroupSeek("orders", "billing"),
		&queengate.APIGroupDelete:    s.GroupDelete("orders", "billing"),
		&queengate.APIConfigure:      s.Configure(),
		&queengate.APIQueuesList:     s.QueuesList(),
		&queengate.APIQueuesGet:      s.QueuesGet("orders"),
		&queengate.APIStatus:         s.Status(),
		&queengate.APIOverview:       s.Overview(),
		&queengate.APIDLQList:        s.DLQList("orders"),
		&queengate.APIDLQRedrive:     s.DLQRedrive("orders"),
		&queengate.APIQueueDelete:    s.QueueDelete("orders"),
		&queengate.APIQueuePurge:     s.QueuePurge("orders"),
	} {
		if want := fill.Replace(a.Template(s.Prefix)); got != want {
			t.Errorf("%s: built %s, want %s", a.Verb, got, want)
		}
	}
	if got, want := s.Push("orders", ""), "acme.queen.push.orders"; got != want {
		t.Errorf("a push to the Default partition: %s, want %s", got, want)
	}
	if got, want := s.Pop("orders", ""), "acme.queen.consume.pop.orders"; got != want {
		t.Errorf("a pop of any partition: %s, want %s", got, want)
	}
}

func TestCheckName(t *testing.T) {
	t.Parallel()
	if err := queengate.CheckName("queue", "orders-EU_1"); err != nil {
		t.Errorf("a valid name refused: %v", err)
	}
	for _, bad := range []string{"", "a.b", "a b", strings.Repeat("x", queengate.MaxNameBytes+1)} {
		err := queengate.CheckName("partition", bad)
		if err == nil || !strings.Contains(err.Error(), "bad partition name") || !strings.Contains(err.Error(), queengate.NameRule) {
			t.Errorf("CheckName(%q): %v, want a refusal naming the rule", bad, err)
		}
	}
}

// TestPathFillsARoute: each {name} of a route takes its value, escaped as
// one path segment ("." and ".." whole), and the method is split off.
func TestPathFillsARoute(t *testing.T) {
	for _, c := range []struct {
		route        string
		values       []string
		method, path string
	}{
		{queengate.APIStatus.Route(), nil, "GET", "/status"},
		{queengate.APIGroupSeek.Route(), []string{"orders", "billing"}, "POST", "/queues/orders/groups/billing/seek"},
		{queengate.RouteTransaction, []string{"q", "p", "a/b c"}, "GET", "/queues/q/partitions/p/transactions/a%2Fb%20c"},
		{queengate.RouteTransaction, []string{"q", "p", ".."}, "GET", "/queues/q/partitions/p/transactions/%2E%2E"},
		{queengate.RouteMessage, []string{"0123-5"}, "GET", "/messages/0123-5"},
	} {
		method, path := queengate.Path(c.route, c.values...)
		if method != c.method || path != c.path {
			t.Errorf("Path(%q, %q) = %s %s, want %s %s", c.route, c.values, method, path, c.method, c.path)
		}
	}
	if queengate.APIPush.Route() != "" || len(queengate.APIMessageGet.HTTP()) != 2 {
		t.Errorf("push has route %q, message get %q: want none, and two", queengate.APIPush.Route(), queengate.APIMessageGet.HTTP())
	}
}
