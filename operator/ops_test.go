package operator_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/dedup"
	"github.com/queengate/queengate/ingest"
	"github.com/queengate/queengate/internal/checkfor"
	"github.com/queengate/queengate/model"
	"github.com/queengate/queengate/pgstore"
)

type queueAnswer struct {
	Queue   string `json:"queue"`
	Options struct {
		DedupWindowSeconds *int   `json:"dedupWindowSeconds"`
		RetentionSeconds   *int   `json:"retentionSeconds"`
		OnConflict         string `json:"onConflict"`
		MaxUnheard         *int   `json:"maxUnheardDeliveries"`
	} `json:"options"`
	Created    bool      `json:"created"`
	CreatedAt  time.Time `json:"createdAt"`
	UpdatedAt  time.Time `json:"updatedAt"`
	Partitions []struct {
		Partition  string     `json:"partition"`
		ID         int64      `json:"id"`
		LastOffset int64      `json:"lastOffset"`
		TxnsStart  int64      `json:"txnsStart"`
		Messages   int64      `json:"messages"`
		Duplicates int64      `json:"duplicates"`
		Cache      CacheState `json:"cache"`
	} `json:"partitions"`
}

// CacheState is a partition's cache entry as the operator API shows it.
type CacheState struct {
	State          string `json:"state"`
	ResidentHashes int    `json:"residentHashes"`
	HydratedFrom   int64  `json:"hydratedFrom"`
	VerifiedUpto   int64  `json:"verifiedUpto"`
}

// mustQueue decodes an operator answer carrying a queue's configuration.
func mustQueue(t *testing.T) func(status int, body []byte) queueAnswer {
	return func(status int, body []byte) queueAnswer { t.Helper(); return decodeQueue(t, status, body) }
}

func decodeQueue(t *testing.T, status int, body []byte) queueAnswer {
	t.Helper()
	if status != 200 {
		t.Fatalf("status %d: %s", status, body)
	}
	var q queueAnswer
	if err := json.Unmarshal(body, &q); err != nil {
		t.Fatalf("answer %s: %v", body, err)
	}
	if q.Options.DedupWindowSeconds == nil || q.Options.RetentionSeconds == nil {
		t.Fatalf("answer %s does not carry the whole configuration", body)
	}
	return q
}

func (q queueAnswer) options() (window, retention int) {
	return *q.Options.DedupWindowSeconds, *q.Options.RetentionSeconds
}

// TestConfigureOverHTTPAndNATS: merge and replace semantics as
// docs/admin-api.md words them, through both faces of one implementation.
func TestConfigureOverHTTPAndNATS(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	g := e.startOpsGateway("", ingest.Config{})
	configure := func(via, body string) queueAnswer {
		t.Helper()
		if via == "http" {
			return mustQueue(t)(g.ViaHTTP(t, "POST", "/configure", "", body))
		}
		return mustQueue(t)(g.ViaNATS(t, "configure", "", body))
	}
	for _, via := range []string{"http", "nats"} {
		q := e.Queue + "-" + via
		// A create starts from the defaults.
		a := configure(via, fmt.Sprintf(`{"queue":%q,"options":{"dedupWindowSeconds":0}}`, q))
		if w, r := a.options(); !a.Created || a.Queue != q || w != 0 || r != 0 {
			t.Errorf("%s create: %+v, want created, window 0, retention 0", via, a)
		}
		// Merge (the default) keeps the deliberately disabled window.
		a = configure(via, fmt.Sprintf(`{"queue":%q,"options":{"retentionSeconds":86400},"mode":"merge"}`, q))
		if w, r := a.options(); a.Created || w != 0 || r != 86400 {
			t.Errorf("%s merge: window %d retention %d created %v; want 0, 86400, false", via, w, r, a.Created)
		}
		a = configure(via, fmt.Sprintf(`{"queue":%q}`, q))
		if w, r := a.options(); w != 0 || r != 86400 {
			t.Errorf("%s empty merge changed the configuration: %d, %d", via, w, r)
		}
		// Replace: what it omits returns to its default.
		a = configure(via, fmt.Sprintf(`{"queue":%q,"options":{"retentionSeconds":60},"mode":"replace"}`, q))
		if w, r := a.options(); w != 3600 || r != 60 {
			t.Errorf("%s replace: window %d retention %d; want 3600 (default), 60", via, w, r)
		}
		// onConflict is a word; merge keeps it, replace resets it.
		a = configure(via, fmt.Sprintf(`{"queue":%q,"options":{"onConflict":"reject"}}`, q))
		if w, r := a.options(); a.Options.OnConflict != "reject" || w != 3600 || r != 60 {
			t.Errorf("%s onConflict merge: %+v", via, a.Options)
		}
		a = configure(via, fmt.Sprintf(`{"queue":%q,"options":{"retentionSeconds":60},"mode":"replace"}`, q))
		if a.Options.OnConflict != "ignore" {
			t.Errorf("%s replace left onConflict %q, want the default ignore", via, a.Options.OnConflict)
		}
		// maxUnheardDeliveries: answered always, 0 kept by a merge, the
		// default 3 back after a replace.
		if a.Options.MaxUnheard == nil || *a.Options.MaxUnheard != 3 {
			t.Errorf("%s: maxUnheardDeliveries %v, want the default 3", via, a.Options.MaxUnheard)
		}
		a = configure(via, fmt.Sprintf(`{"queue":%q,"options":{"maxUnheardDeliveries":0}}`, q))
		if a = configure(via, fmt.Sprintf(`{"queue":%q}`, q)); a.Options.MaxUnheard == nil || *a.Options.MaxUnheard != 0 {
			t.Errorf("%s merge: maxUnheardDeliveries %v, want 0", via, a.Options.MaxUnheard)
		}
		a = configure(via, fmt.Sprintf(`{"queue":%q,"mode":"replace"}`, q))
		if a.Options.MaxUnheard == nil || *a.Options.MaxUnheard != 3 {
			t.Errorf("%s replace: maxUnheardDeliveries %v, want the default 3", via, a.Options.MaxUnheard)
		}
		a = configure(via, fmt.Sprintf(`{"queue":%q,"options":{"retentionSeconds":60},"mode":"replace"}`, q))
		// GET answers the same configuration on both faces.
		h := mustQueue(t)(g.ViaHTTP(t, "GET", "/queues/"+q, "", ""))
		n := mustQueue(t)(g.ViaNATS(t, "queues.get."+q, "", ""))
		if hw, hr := h.options(); hw != 3600 || hr != 60 || !h.UpdatedAt.Equal(n.UpdatedAt) || h.Queue != n.Queue {
			t.Errorf("%s: GET over HTTP %+v, over NATS %+v", via, h, n)
		}
	}
	status, body := g.ViaHTTP(t, "GET", "/queues", "", "")
	var list struct {
		Queues []queueAnswer `json:"queues"`
	}
	if status != 200 || json.Unmarshal(body, &list) != nil {
		t.Fatalf("GET /queues: %d %s", status, body)
	}
	seen := 0
	for _, q := range list.Queues {
		if strings.HasPrefix(q.Queue, e.Queue+"-") {
			seen++
		}
	}
	if seen != 2 {
		t.Errorf("GET /queues lists %d of the 2 queues configured", seen)
	}
	if status, body := g.ViaNATS(t, "queues.list", "", ""); status != 200 || !bytes.Contains(body, []byte(e.Queue+"-http")) {
		t.Errorf("queues.list over NATS: %d %s", status, body)
	}
}

// TestConfigureBadInputIsA400AndChangesNothing: every kind of bad input
// named by docs/admin-api.md, on both faces.
func TestConfigureBadInputIsA400AndChangesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	g := e.startOpsGateway("", ingest.Config{})
	q := e.Queue
	if status, body := g.ViaHTTP(t, "POST", "/configure", "", fmt.Sprintf(`{"queue":%q,"options":{"dedupWindowSeconds":600}}`, q)); status != 200 {
		t.Fatalf("setup: %d %s", status, body)
	}
	cases := []struct{ body, want string }{
		{fmt.Sprintf(`{"queue":%q,"options":{"dedupWindowSecs":5}}`, q), `"options": unknown field "dedupWindowSecs": the options object has only "dedupWindowSeconds", "retentionSeconds", "onConflict", "maxAttempts", "retainUntil", "retryDelayMs", "retryBackoffMs", "maxAckPending", "groupIdleSeconds" and "maxUnheardDeliveries"`},
		{fmt.Sprintf(`{"queue":%q,"options":{"dedupWindowSeconds":"600"}}`, q), `"options": "dedupWindowSeconds" must be a whole number, not a string "600"`},
		{fmt.Sprintf(`{"queue":%q,"options":{"dedupWindowSeconds":1.5}}`, q), "must be a whole number, not the JSON number 1.5"},
		{fmt.Sprintf(`{"queue":%q,"options":{"dedupWindowSeconds":-1}}`, q), `"dedupWindowSeconds" is -1: from 0 to 2147483647`},
		{fmt.Sprintf(`{"queue":%q,"options":{"retentionSeconds":99999999999}}`, q), `"retentionSeconds" is 99999999999: from 0 to 2147483647`},
		{fmt.Sprintf(`{"queue":%q,"options":{"dedupWindowSeconds":null}}`, q), "must be a whole number, not null"},
		{fmt.Sprintf(`{"queue":%q,"options":[1]}`, q), `"options" must be a JSON object`},
		{fmt.Sprintf(`{"queue":%q,"options":{"dedupWindowSeconds":5,"dedupWindowSeconds":6}}`, q), `"options": field "dedupWindowSeconds" is given twice`},
		{fmt.Sprintf(`{"queue":%q,"queue":"other","options":{"dedupWindowSeconds":5}}`, q), `field "queue" is given twice`},
		{`[{"queue":"q"}]`, "the body must be a JSON object"},
		{fmt.Sprintf(`{"queue":%q,"options":{"retentionSeconds":%s1%s}}`, q, strings.Repeat("[", 600), strings.Repeat("]", 600)), "nesting deeper than 512"},
		{fmt.Sprintf(`{"queue":%q,"mode":"reset"}`, q), `"mode" must be`},
		{fmt.Sprintf(`{"queue":%q,"extra":1}`, q), `unknown field "extra"`},
		{`{"queue":"bad.name","options":{"dedupWindowSeconds":1}}`, `"queue" must be a name, a string of 1-128 bytes of [A-Za-z0-9_-], not a string "bad.name"`},
		{`{"options":{"dedupWindowSeconds":1}}`, `"queue" is missing`},
		{`{"queue":7}`, `"queue" must be a name, a string of 1-128 bytes of [A-Za-z0-9_-], not the JSON number 7`},
		{fmt.Sprintf(`{"queue":%q,"options":{"onConflict":"warn"}}`, q), `"onConflict" must be one of "ignore", "flag", "reject", not a string "warn"`},
		{fmt.Sprintf(`{"queue":%q,"options":{"onConflict":1}}`, q), `"onConflict" must be one of "ignore", "flag", "reject", not the JSON number 1`},
		{fmt.Sprintf(`{"queue":%q,"options":{"onConflict":"flag","onConflict":"reject"}}`, q), `field "onConflict" is given twice`},
		{`not json`, "the body must be a JSON object"},
		{``, "the body is empty: send a JSON object"},
		{fmt.Sprintf(`{"queue":%q,"options":{"retryDelayMs":86400001}}`, q), `"retryDelayMs" is 86400001: from 0 to 86400000`},
		{fmt.Sprintf(`{"queue":%q,"options":{"retryBackoffMs":1000}}`, q), `"retryBackoffMs" must be an array of delays in milliseconds`},
		{fmt.Sprintf(`{"queue":%q,"options":{"retryBackoffMs":[1000,-5]}}`, q), `"retryBackoffMs[1]" is -5: from 0 to 86400000`},
		{fmt.Sprintf(`{"queue":%q,"options":{"retryDelayMs":5,"retryBackoffMs":[null]}}`, q), `"retryBackoffMs[0]" must be a whole number, not null`},
		{fmt.Sprintf(`{"queue":%q,"options":{"maxUnheardDeliveries":1001}}`, q), `"maxUnheardDeliveries" is 1001: from 0 to 1000`},
		{fmt.Sprintf(`{"queue":%q,"options":{"maxUnheardDeliveries":-1}}`, q), `"maxUnheardDeliveries" is -1: from 0 to 1000`},
		{fmt.Sprintf(`{"queue":%q,"options":{"maxUnheardDeliveries":"3"}}`, q), `"maxUnheardDeliveries" must be a whole number, not a string "3"`},
	}
	for _, c := range cases {
		for _, via := range []string{"http", "nats"} {
			var (
				status int
				body   []byte
			)
			if via == "http" {
				status, body = g.ViaHTTP(t, "POST", "/configure", "", c.body)
			} else {
				status, body = g.ViaNATS(t, "configure", "", c.body)
			}
			var werr wireErr
			if status != 400 || json.Unmarshal(body, &werr) != nil || werr.Error.Code != 400 || !strings.Contains(werr.Error.Message, c.want) {
				t.Errorf("%s %.80s: %d %s; want 400 saying %q", via, c.body, status, body, c.want)
			}
			if strings.Contains(werr.Error.Message, "json:") || strings.Contains(werr.Error.Message, "Go value") {
				t.Errorf("%s %.80s: the error leaks Go internals: %s", via, c.body, werr.Error.Message)
			}
		}
	}
	c, err := e.Store.QueueConfig(context.Background(), q)
	if err != nil || c.DedupWindowSeconds != 600 || c.RetentionSeconds != 0 || c.OnConflict != model.ConflictIgnore ||
		c.RetryDelayMs != 0 || len(c.RetryBackoffMs) != 0 || c.MaxUnheardDeliveries != model.DefaultMaxUnheardDeliveries {
		t.Errorf("after bad requests: %+v, %v; want unchanged (600, 0, ignore, no retry delays, 3 unheard)", c.Options, err)
	}
	if status, _ := g.ViaHTTP(t, "GET", "/queues/"+q+"-missing", "", ""); status != 404 {
		t.Errorf("GET of an unknown queue: %d, want 404", status)
	}
	if status, _ := g.ViaNATS(t, "queues.get."+q+"-missing", "", ""); status != 404 {
		t.Errorf("NATS get of an unknown queue: %d, want 404", status)
	}
	for _, c := range []struct {
		method, path string
		code         int
	}{{"GET", "/configure", 405}, {"PUT", "/queues/" + q, 405}, {"POST", "/status", 405}, {"GET", "/queues/", 404}} {
		status, body := g.ViaHTTP(t, c.method, c.path, "", "")
		var werr wireErr
		if status != c.code || json.Unmarshal(body, &werr) != nil || werr.Error.Code != c.code {
			t.Errorf("%s %s: %d %s; want %d in the API's error format", c.method, c.path, status, body, c.code)
		}
	}
}

// TestAdminTokenGuardsTheOperatorAPI: without the token a configure is
// refused and changes nothing, on both faces; health and metrics stay open.
func TestAdminTokenGuardsTheOperatorAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	g := e.startOpsGateway("s3cret-token", ingest.Config{})
	body := fmt.Sprintf(`{"queue":%q,"options":{"dedupWindowSeconds":5}}`, e.Queue)
	for _, token := range []string{"", "wrong"} {
		if status, b := g.ViaHTTP(t, "POST", "/configure", token, body); status != 401 || !bytes.Contains(b, []byte("QUEEN_ADMIN_TOKEN")) {
			t.Errorf("HTTP configure with token %q: %d %s; want 401 naming the token", token, status, b)
		}
		if status, _ := g.ViaNATS(t, "configure", token, body); status != 401 {
			t.Errorf("NATS configure with token %q: %d; want 401", token, status)
		}
		for _, path := range []string{"/queues", "/queues/" + e.Queue, "/status"} {
			if status, _ := g.ViaHTTP(t, "GET", path, token, ""); status != 401 {
				t.Errorf("GET %s with token %q: %d; want 401", path, token, status)
			}
		}
	}
	if _, err := e.Store.QueueConfig(context.Background(), e.Queue); err == nil {
		t.Fatal("an unauthenticated configure created the queue")
	}
	for _, path := range []string{"/healthz", "/metrics"} {
		if status, _ := g.ViaHTTP(t, "GET", path, "", ""); status != 200 {
			t.Errorf("GET %s without a token: %d; want 200 (open)", path, status)
		}
	}
	// Profiles expose the process: guarded like the API.
	if status, _ := g.ViaHTTP(t, "GET", "/debug/pprof/", "", ""); status != 401 {
		t.Errorf("GET /debug/pprof/ without the token: %d, want 401", status)
	}
	if status, _ := g.ViaHTTP(t, "GET", "/debug/pprof/", "s3cret-token", ""); status != 200 {
		t.Errorf("GET /debug/pprof/ with the token: %d, want 200", status)
	}
	if status, b := g.ViaHTTP(t, "POST", "/configure", "s3cret-token", body); status != 200 {
		t.Errorf("with the token: %d %s", status, b)
	}
	if status, _ := g.ViaNATS(t, "configure", "s3cret-token", body); status != 200 {
		t.Errorf("NATS with the token: %d", status)
	}
}

// TestQueueFiguresAndStatus: per-partition figures after pushes, and the
// gateway's status.
func TestQueueFiguresAndStatus(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	g := e.startOpsGateway("", ingest.Config{})
	e.Push(t, e.Subject("p1"), msgs("f-1", "f-2", "f-3"))
	e.Push(t, e.Subject("p1"), msgs("f-2", "f-4"))
	e.Push(t, e.Subject("p2"), msgs("g-1"))
	q := mustQueue(t)(g.ViaHTTP(t, "GET", "/queues/"+e.Queue, "", ""))
	if len(q.Partitions) != 2 || q.Partitions[0].Partition != "p1" || q.Partitions[1].Partition != "p2" {
		t.Fatalf("partitions %+v, want p1 and p2", q.Partitions)
	}
	p1 := q.Partitions[0]
	if p1.LastOffset != 3 || p1.Messages != 5 || p1.Duplicates != 1 || p1.TxnsStart != 0 {
		t.Errorf("p1 %+v, want last offset 3, 5 messages, 1 duplicate", p1)
	}
	if p1.Cache.State != "vouching" || p1.Cache.ResidentHashes != 4 || p1.Cache.VerifiedUpto != 3 {
		t.Errorf("p1 cache %+v, want vouching with 4 hashes up to offset 3", p1.Cache)
	}

	status, body := g.ViaHTTP(t, "GET", "/status", "", "")
	var st queengate.StatusAnswer
	if status != 200 || json.Unmarshal(body, &st) != nil {
		t.Fatalf("status: %d %s", status, body)
	}
	if !st.Ready || st.Postgres != "ok" || st.NATS != "connected" || st.Version != "1.2.3" ||
		st.SchemaVersion != pgstore.LatestVersion() || st.Cache == nil || st.Cache.ResidentHashes < 5 || st.Cache.BudgetBytes != 512<<20 {
		t.Errorf("status %s", body)
	}
	if status, body := g.ViaNATS(t, "status", "", ""); status != 200 || !bytes.Contains(body, []byte(`"ready":true`)) {
		t.Errorf("NATS status: %d %s", status, body)
	}
}

// manualClock is the cache's clock, moved by the test.
type manualClock struct {
	mu     sync.Mutex
	offset time.Duration
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

func (c *manualClock) Add(d time.Duration) { c.mu.Lock(); c.offset += d; c.mu.Unlock() }

// TestWindowChangeDownAndUp: SQL uses a changed window at once, whatever
// the cache believes; the cache notices within its memo TTL and rehydrates
// under the new window.
func TestWindowChangeDownAndUp(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	clock := &manualClock{}
	// Long enough that the retry right after a configure meets a cache
	// that has not noticed yet; the waits below are conditions, not sleeps.
	const ttl = time.Second
	g := e.startOpsGateway("", ingest.Config{PartitionTTL: ttl, Cache: dedup.Config{Now: clock.Now}})
	ctx := context.Background()
	configure := func(window int) {
		t.Helper()
		if status, b := g.ViaHTTP(t, "POST", "/configure", "",
			fmt.Sprintf(`{"queue":%q,"options":{"dedupWindowSeconds":%d}}`, e.Queue, window)); status != 200 {
			t.Fatalf("configure: %d %s", status, b)
		}
	}
	backdate := func(by time.Duration) {
		t.Helper()
		for _, table := range []string{"log_txns", "log_segments"} {
			if _, err := e.Store.Pool().Exec(ctx, `UPDATE queen.`+table+` t SET created_at = t.created_at - make_interval(secs => $1)
				FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
				WHERE t.partition_id = p.id AND q.name = $2`, by.Seconds(), e.Queue); err != nil {
				t.Fatal(err)
			}
		}
		clock.Add(by)
	}
	get := func() queueAnswer {
		t.Helper()
		return mustQueue(t)(g.ViaHTTP(t, "GET", "/queues/"+e.Queue, "", ""))
	}
	// pushUntil pushes fresh messages until the cache's entry satisfies
	// cond: the memo is reread, and the entry rebuilt, only on a flush.
	fresh := 0
	pushUntil := func(what string, cond func(c CacheState) bool) CacheState {
		t.Helper()
		var c CacheState
		checkfor.Check(t, 30*time.Second, func() error {
			fresh++
			wantStatus(t, e.Push(t, e.Subject("p"), msgs(fmt.Sprint("fresh-", fresh))), "queued")
			if c = get().Partitions[0].Cache; !cond(c) {
				return fmt.Errorf("%s (cache %+v)", what, c)
			}
			return nil
		})
		return c
	}

	// Down: 3600 -> 60. "old" is 120 s old and resident in the cache.
	configure(3600)
	wantStatus(t, e.Push(t, e.Subject("p"), msgs("old")), "queued")
	wantStatus(t, e.Push(t, e.Subject("p"), msgs("warm")), "queued") // the cache vouches from here
	backdate(120 * time.Second)
	configure(60)
	got := e.Push(t, e.Subject("p"), msgs("old"))
	wantStatus(t, got, "queued")
	if off(got[0]) != 2 {
		t.Errorf("retry past the shrunk window stored at offset %d, want 2", off(got[0]))
	}

	// Up: 60 -> 3600. "gone" is 120 s old, expired from the cache under
	// the 60 s window, and the cache still vouches under 60 s until its
	// memo expires. SQL must not trust that vouch.
	wantStatus(t, e.Push(t, e.Subject("p"), msgs("gone")), "queued") // offset 3
	backdate(120 * time.Second)
	// The memo rereads the window (60) and the entry is rebuilt under it:
	// offset 3 is then outside what the entry holds.
	pushUntil("the entry rebuilt under 60 s, offset 3 expired", func(c CacheState) bool {
		return c.State == "vouching" && c.HydratedFrom >= 3
	})
	configure(3600)
	got = e.Push(t, e.Subject("p"), msgs("gone"))
	wantStatus(t, got, "duplicate")
	if off(got[0]) != 3 {
		t.Errorf("retry inside the grown window: duplicate of offset %d, want 3", off(got[0]))
	}

	// Within the TTL the cache rehydrates under the new window: its entry
	// then reaches back past offset 3 again.
	pushUntil("the entry rehydrated under 3600 s, reaching below offset 3", func(c CacheState) bool {
		return c.State == "vouching" && c.HydratedFrom < 3
	})
}
