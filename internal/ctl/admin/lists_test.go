package admin

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// pages serves GET /queues from a table of answers by the from it is
// asked for.
func pages(t *testing.T, answers map[string]string) *HTTPClient {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		answer, ok := answers[r.URL.Query().Get("from")]
		if !ok {
			http.Error(w, `{"error":{"code":404,"message":"no such page"}}`, http.StatusNotFound)
			return
		}
		io.WriteString(w, answer)
	}))
	t.Cleanup(srv.Close)
	return NewHTTPClient(srv.URL, "", 5*time.Second)
}

func TestAllQueuesFollowsPages(t *testing.T) {
	t.Parallel()
	c := pages(t, map[string]string{
		"":  `{"queues":[{"queue":"a"},{"queue":"b"}],"nextQueue":"c"}`,
		"c": `{"queues":[{"queue":"c"}]}`,
	})
	queues, err := AllQueues(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, q := range queues {
		names = append(names, string(q))
	}
	if got, want := strings.Join(names, ","), `{"queue":"a"},{"queue":"b"},{"queue":"c"}`; got != want {
		t.Errorf("queues %s, want %s", got, want)
	}
}

// A gateway whose pages do not advance is refused, not asked forever.
func TestAllQueuesRefusesAPageThatDoesNotAdvance(t *testing.T) {
	t.Parallel()
	for name, answers := range map[string]map[string]string{
		"names itself next": {"": `{"queues":[{"queue":"a"}],"nextQueue":"b"}`, "b": `{"queues":[{"queue":"b"}],"nextQueue":"b"}`},
		"lists nothing":     {"": `{"queues":[],"nextQueue":"b"}`},
	} {
		_, err := AllQueues(context.Background(), pages(t, answers))
		if err == nil || !strings.Contains(err.Error(), "unexpected answer from the gateway: a page from") {
			t.Errorf("%s: error %v, want the page refused", name, err)
		}
	}
}

func TestHTTPClientErrors(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer good" {
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"error":{"code":401,"message":"missing or wrong admin token"}}`)
			return
		}
		http.NotFound(w, r) // not the protocol's error body: a route the gateway lacks
	}))
	defer srv.Close()
	ctx := context.Background()
	_, err := NewHTTPClient(srv.URL, "bad", time.Second).Do(ctx, OpStatus())
	var ge *GatewayError
	if !errors.As(err, &ge) || ge.Code != 401 || !strings.Contains(ge.Hint, "refused the admin token") {
		t.Errorf("a wrong token: %v", err)
	}
	_, err = NewHTTPClient(srv.URL, "good", time.Second).Do(ctx, OpStatus())
	if !errors.As(err, &ge) || ge.Code != 404 || !strings.Contains(ge.Hint, "does not serve GET /status") {
		t.Errorf("a missing route: %v", err)
	}
	srv.Close()
	_, err = NewHTTPClient(srv.URL, "good", time.Second).Do(ctx, OpStatus())
	var ue *UnreachableError
	if !errors.As(err, &ue) || !strings.Contains(ue.Msg, "could not reach the gateway at "+srv.URL) {
		t.Errorf("a closed server: %v", err)
	}
}
