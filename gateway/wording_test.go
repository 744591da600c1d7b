package gateway_test

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/queengate/queengate/ingest"
	"github.com/queengate/queengate/model"
)

// TestAnswersSayOneThing: error and explanation texts say what applies,
// once: a timer is one object (no array), a not-found is said once, an
// out-of-range offset gives the field's range, a bare push subject its
// expected form, explain over HTTP speaks of its parameters (no byte of
// a body the user never sent), a rejected conflict is explained as the
// failure alone, and a renewal's answer carries no "released".
func TestAnswersSayOneThing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.SetOnConflict(t, model.ConflictReject)
	g := e.startOpsGateway("", ingest.Config{})
	wantStatus(t, e.Push(t, e.Subject("p"), `{"transactionId":"pay-1","data":{"amount":10}}`), "queued")
	q := e.Queue
	// The group exists: an ack on an unknown partition is about the partition.
	_, popped := g.ViaNATS(t, "consume.pop."+q+".p", "", `{"group":"g","consumer":"c"}`)
	explain := func(id, data string) string {
		v := url.Values{"transactionId": {id}}
		if data != "" {
			v.Set("data", data)
		}
		return "/queues/" + q + "/partitions/p/explain?" + v.Encode()
	}
	for _, c := range []struct {
		name, subject, path, body string
		status                    int
		want                      []string
		not                       []string
	}{
		{name: "a timer's empty body", subject: "timer." + q + ".p", status: 400,
			want: []string{"empty body: a timer is one JSON message object"}, not: []string{"array"}},
		{name: "a timer's number body", subject: "timer." + q + ".p", body: "1", status: 400,
			want: []string{"a timer must be one JSON message object"}, not: []string{"array"}},
		{name: "a pop of an unknown queue", subject: "consume.pop.nosuch-" + q, body: `{"group":"g"}`, status: 404,
			want: []string{`"unknown queue nosuch-` + q + `"`}},
		{name: "a read of an unknown partition", subject: "read." + q + ".nosuch", status: 404,
			want: []string{`"partition ` + q + `/nosuch does not exist"`}},
		{name: "an ack on an unknown partition", subject: "consume.ack." + q + ".nosuch", status: 404,
			body: `{"group":"g","leaseId":"00000000-0000-0000-0000-000000000000","items":[{"offset":0,"status":"completed"}]}`,
			want: []string{`"unknown partition nosuch"`}},
		{name: "an offset beyond 64 bits", subject: "consume.ack." + q + ".p", status: 400,
			body: `{"group":"g","leaseId":"00000000-0000-0000-0000-000000000000","items":[{"offset":99999999999999999999,"status":"completed"}]}`,
			want: []string{`is 99999999999999999999: from 0 to 9223372036854775807`}, not: []string{"-9223372036854775808"}},
		{name: "the bare push subject", subject: "push", body: `{"data":1}`, status: 400,
			want: []string{`subject \"queen.push\" must be queen.push.<queue> or queen.push.<queue>.<partition>`}},
		{name: "explain of a NUL id over HTTP", path: explain("a\x00b", ""), status: 400,
			want: []string{`(NUL) cannot be stored`}, not: []string{"at byte"}},
		{name: "explain of malformed data over HTTP", path: explain("pay-1", `{"amount":`), status: 400,
			want: []string{"the data parameter is malformed JSON: unexpected end of input at byte 10"}},
		{name: "explain of a rejected conflict", path: explain("pay-1", `{"amount":11}`), status: 200,
			want: []string{`a push of this data now fails with \"conflict\": true and writes nothing`}, not: []string{"answers duplicate"}},
	} {
		var (
			status int
			body   []byte
		)
		if c.path != "" {
			status, body = g.ViaHTTP(t, "GET", c.path, "", "")
		} else {
			status, body = g.ViaNATS(t, c.subject, "", c.body)
		}
		if status != c.status {
			t.Errorf("%s: %d %s; want %d", c.name, status, body, c.status)
		}
		for _, w := range c.want {
			if !strings.Contains(string(body), w) {
				t.Errorf("%s: %s; want it to say %s", c.name, body, w)
			}
		}
		for _, n := range append(c.not, "queue not found", "not found: partition", "unknown partition partition") {
			if strings.Contains(string(body), n) {
				t.Errorf("%s: %s; want no %q", c.name, body, n)
			}
		}
	}

	var pop struct {
		LeaseID string `json:"leaseId"`
	}
	if err := json.Unmarshal(popped, &pop); err != nil || pop.LeaseID == "" {
		t.Fatalf("pop: %s", popped)
	}
	status, renewed := g.ViaNATS(t, "consume.renew."+q+".p", "", `{"group":"g","leaseId":"`+pop.LeaseID+`","leaseMs":60000}`)
	if status != 200 || strings.Contains(string(renewed), "released") {
		t.Errorf("renew: %d %s; want 200 without \"released\"", status, renewed)
	}
	status, released := g.ViaNATS(t, "consume.release."+q+".p", "", `{"group":"g","leaseId":"`+pop.LeaseID+`"}`)
	if status != 200 || !strings.Contains(string(released), `"released":true`) {
		t.Errorf("release: %d %s; want 200 with \"released\":true", status, released)
	}
}
