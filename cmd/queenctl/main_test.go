package main

import (
	"context"
	"flag"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// result is one queenctl run.
type result struct {
	code           int
	stdout, stderr string
}

// ctl runs queenctl with an empty environment, so the tests do not depend
// on the QUEEN_* variables of whoever runs them.
func ctl(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	return ctlEnv(t, nil, stdin, args...)
}

func ctlEnv(t *testing.T, env map[string]string, stdin string, args ...string) result {
	t.Helper()
	var out, errOut strings.Builder
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	code := runEnv(context.Background(), args, lookup, strings.NewReader(stdin), &out, &errOut)
	r := result{code: code, stdout: out.String(), stderr: errOut.String()}
	t.Logf("queenctl %s -> exit %d\n%s%s", strings.Join(args, " "), code, r.stdout, r.stderr)
	return r
}

// expect checks the exit code and that stderr (or stdout, for exit 0)
// contains each of want.
func (r result) expect(t *testing.T, code int, want ...string) {
	t.Helper()
	if r.code != code {
		t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, code, r.stdout, r.stderr)
	}
	where := r.stderr
	if code == exitOK {
		where = r.stdout
	}
	for _, w := range want {
		if !strings.Contains(where, w) {
			t.Errorf("output lacks %q:\nstdout: %s\nstderr: %s", w, r.stdout, r.stderr)
		}
	}
}

// deadNATS is a NATS URL nothing listens on; usage errors must be found
// before queenctl would connect to it.
const deadNATS = "nats://127.0.0.1:1"

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		args  []string
		stdin string
		want  string
	}{
		{nil, "", "no command given"},
		{[]string{"frobnicate"}, "", `unknown command "frobnicate" (see queenctl --help)`},
		{[]string{"--bogus", "status"}, "", "flag provided but not defined: -bogus (see queenctl --help)"},
		{[]string{"status", "--bogus"}, "", "status: flag provided but not defined: -bogus (see queenctl status --help)"},
		{[]string{"status", "extra"}, "", `status: unexpected arguments ["extra"]`},
		{[]string{"-o", "yaml", "status"}, "", `-o "yaml": use table or json`},
		{[]string{"status", "--timeout", "0s"}, "", "--timeout 0s: must be positive"},
		{[]string{"status", "--timeout", "soon"}, "", `invalid value "soon" for flag -timeout`},
		{[]string{"status", "--prefix", "a..b"}, "", `--prefix "a..b": each dot-separated token`},
		{[]string{"status", "--http", "ftp://x"}, "", `--http "ftp://x": want an address like http://127.0.0.1:6632`},
		{[]string{"apply"}, "", "apply: give the manifest with -f FILE"},
		{[]string{"apply", "-f", "x.yaml", "extra"}, "", "apply: unexpected arguments"},
		{[]string{"apply", "-f", "/nonexistent/m.yaml"}, "", "reading the manifest: open /nonexistent/m.yaml"},
		{[]string{"apply", "-f", "../../testdata/manifests/invalid.yaml"}, "", `line 5: unknown key "dedupWindow"`},
		{[]string{"apply", "-f", "-"}, "queues:\n  - name: a b\n", `stdin is not a valid manifest; nothing was sent. Fix:
  line 2: bad queue name "a b"`},
		{[]string{"configure"}, "", "configure: give exactly one queue name"},
		{[]string{"configure", "a", "b"}, "", "configure: give exactly one queue name"},
		{[]string{"configure", "bad.name"}, "", `bad queue name "bad.name": use 1-128 bytes of [A-Za-z0-9_-]`},
		{[]string{"configure", "q", "--retention", "1.5s"}, "", `invalid value "1.5s" for flag -retention: must be whole seconds`},
		{[]string{"configure", "q", "--dedup-window", "600"}, "", "missing unit, e.g. 600s"},
		{[]string{"configure", "q", "--dedup-window", "-1m"}, "", "must be 0 or more"},
		{[]string{"get"}, "", "get: use 'get queues', 'get queue QUEUE', 'get groups QUEUE' or 'get message ...'"},
		{[]string{"get", "partitions"}, "", "get: use 'get queues', 'get queue QUEUE', 'get groups QUEUE' or 'get message ...'"},
		{[]string{"get", "queue"}, "", "get queue: which queue?"},
		{[]string{"get", "queue", "a/b"}, "", `bad queue name "a/b"`},
		{[]string{"push"}, "", "push: which queue?"},
		{[]string{"push", "q", "p", "m"}, "", "push needs NATS (the gateway takes pushes over NATS only): set --nats or QUEENCTL_NATS_URL"},
		{[]string{"push", "--http", "http://127.0.0.1:1", "q", "p", "m"}, "", "push needs NATS"},
		{[]string{"push", "q.x", "--nats", deadNATS}, "", `bad queue name "q.x"`},
		{[]string{"push", "q", "p*", "--nats", deadNATS}, "", `bad partition name "p*"`},
		{[]string{"push", "q", "p", "a", "b", "--txn-id", "t", "--nats", deadNATS}, "", "--txn-id is the transactionId of one message argument"},
		{[]string{"push", "q", "p", "--txn-id", "t", "--nats", deadNATS}, "", "--txn-id is the transactionId of one message argument"},
		{[]string{"push", "q", "p", "a", "--txn-id", strings.Repeat("t", 257), "--nats", deadNATS}, "", "--txn-id is 257 bytes"},
		{[]string{"push", "q", "p", "a", "--envelope", "--nats", deadNATS}, "", "--envelope is for lines on stdin"},
		{[]string{"push", "q", "p", "a", "--batch", "0", "--nats", deadNATS}, "", "--batch 0: must be at least 1"},
		{[]string{"push", "q", "--nats", deadNATS}, "\n  \n", "push: no messages"},
		{[]string{"push", "q", "--nats", deadNATS}, "1\n{oops\n3\n", "push: stdin line 2: not valid JSON"},
		{[]string{"push", "q", "--envelope", "--nats", deadNATS}, `{"data":1}` + "\n[1]\n", "stdin line 2: with --envelope each line is a message object"},
		{[]string{"push", "q", "--envelope", "--nats", deadNATS}, `{"transactionId":5}`, "stdin line 1: transactionId must be a string of 1-256 bytes"},
		{[]string{"push", "q", "--envelope", "--nats", deadNATS}, `{"transactionId":""}`, "stdin line 1: transactionId must be a string"},
		{[]string{"push", "q", "--envelope", "--nats", deadNATS}, `{"orderId":9137}`, `stdin line 1: unknown field "orderId": with --envelope each line is a message object`},
		{[]string{"help", "nope"}, "", `unknown command "nope"`},
		{[]string{"status", "--nats", deadNATS, "--nats-nkey", "/nonexistent/user.nk"}, "", "--nats-nkey: stat /nonexistent/user.nk: no such file or directory"},
		{[]string{"status", "--nats", deadNATS, "--nats-nkey", "main.go"}, "", "--nats-nkey main.go:"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			t.Parallel()
			r := ctl(t, c.stdin, c.args...)
			r.expect(t, exitUsage, c.want)
			if !strings.HasPrefix(r.stderr, "queenctl: ") && c.args != nil {
				t.Errorf("stderr does not start with queenctl: %s", r.stderr)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
		r := ctl(t, "", args...)
		r.expect(t, exitOK, "Usage:", "Exit codes:", "3  could not reach the gateway", "Global flags:", "--nats URL", "QUEEN_ADMIN_TOKEN")
		if r.stderr != "" {
			t.Errorf("help wrote to stderr: %s", r.stderr)
		}
	}
	for _, c := range commands() {
		name := c.Name
		for _, args := range [][]string{{name, "--help"}, {"help", name}, {"--nats", deadNATS, name, "-h"}} {
			ctl(t, "", args...).expect(t, exitOK, "Usage:\n  queenctl "+name, "Global flags:")
		}
	}
	// A read over NATS goes with the queue's data: no admin token.
	ctl(t, "", "read", "--help").expect(t, exitOK, "Over NATS", "not the admin token")
	// A command's own flags are listed apart from the global ones.
	r := ctl(t, "", "push", "--help")
	own, global, _ := strings.Cut(r.stdout, "Global flags:")
	if !strings.Contains(own, "--txn-id") || strings.Contains(global, "--txn-id") || !strings.Contains(global, "--timeout") {
		t.Errorf("push --help does not separate its flags:\n%s", r.stdout)
	}
}

// The main help lists every command and every form of one: what each
// command's usage shows after "queenctl" up to its first argument.
func TestHelpListsEveryCommand(t *testing.T) {
	t.Parallel()
	help := ctl(t, "", "--help").stdout
	var usages []string
	for _, c := range commands() {
		usages = append(usages, c.Usage)
		for _, sub := range c.Subs {
			usages = append(usages, sub.Usage)
		}
	}
	for _, u := range usages {
		for _, line := range strings.Split(u, "\n") {
			rest, ok := strings.CutPrefix(line, "  queenctl ")
			if !ok {
				continue
			}
			rest, _, _ = strings.Cut(rest, "  ") // before its description
			var words []string
			for _, w := range strings.Fields(rest) {
				if w != strings.ToLower(w) || strings.ContainsAny(w, "[-<") {
					break // an argument, a flag or a redirection
				}
				words = append(words, w)
			}
			if form := "\n  " + strings.Join(words, " ") + " "; !strings.Contains(help, form) {
				t.Errorf("queenctl --help does not list %q (from the usage line %q)", strings.TrimSpace(form), line)
			}
		}
	}
}

// The command table is in the order the main help lists the commands.
func TestCommandsInHelpOrder(t *testing.T) {
	t.Parallel()
	last := -1
	for _, c := range commands() {
		at := strings.Index(mainUsage, "\n  "+c.Name+" ")
		if at < last {
			t.Errorf("the main help lists %q before the command the table has ahead of it", c.Name)
		}
		last = at
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--version"}, {"version"}} {
		r := ctl(t, "", args...)
		r.expect(t, exitOK, "queenctl "+version)
		if r.stderr != "" {
			t.Errorf("%v wrote to stderr: %s", args, r.stderr)
		}
	}
}

// fakeGateway is an HTTP server that records requests and answers with
// the handler given; for what a live gateway cannot easily be made to do.
type fakeGateway struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []*http.Request
	body []string
}

func newFakeGateway(t *testing.T, h http.HandlerFunc) *fakeGateway {
	f := &fakeGateway{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.reqs = append(f.reqs, r)
		f.body = append(f.body, string(b))
		f.mu.Unlock()
		h(w, r)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeGateway) requests() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.reqs)
}

func answerJSON(w http.ResponseWriter, code int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	io.WriteString(w, body)
}

func TestEnvFlagsAndTransportChoice(t *testing.T) {
	t.Parallel()
	f := newFakeGateway(t, func(w http.ResponseWriter, r *http.Request) {
		answerJSON(w, 200, `{"ready":true,"cache":{"entries":1}}`)
	})
	env := map[string]string{"QUEENCTL_HTTP_URL": f.URL, "QUEEN_ADMIN_TOKEN": "from-env"}
	ctlEnv(t, env, "", "status").expect(t, exitOK, "ready:", "cache.entries:")
	// A flag wins over the environment, before or after the command;
	// --http also takes host:port.
	ctlEnv(t, env, "", "--token", "before", "status").expect(t, exitOK)
	ctlEnv(t, env, "", "status", "--token", "after", "--http", strings.TrimPrefix(f.URL, "http://")).expect(t, exitOK)
	// With both --http and --nats, admin operations use HTTP (the NATS
	// URL is never dialled).
	ctlEnv(t, env, "", "status", "--nats", deadNATS).expect(t, exitOK)
	f.mu.Lock()
	defer f.mu.Unlock()
	var got []string
	for _, r := range f.reqs {
		got = append(got, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
	}
	want := []string{"GET /status Bearer from-env", "GET /status Bearer before", "GET /status Bearer after", "GET /status Bearer from-env"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("requests %q, want %q", got, want)
	}
}

func TestGatewayErrorsOverHTTP(t *testing.T) {
	t.Parallel()
	f := newFakeGateway(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Header.Get("Authorization") != "Bearer good":
			answerJSON(w, 401, `{"error":{"code":401,"message":"missing or wrong admin token"}}`)
		case r.URL.Path == "/queues/ghost":
			answerJSON(w, 404, `{"error":{"code":404,"message":"queue \"ghost\" not found"}}`)
		case r.URL.Path == "/configure":
			answerJSON(w, 400, `{"error":{"code":400,"message":"unknown option \"x\""}}`)
		case r.URL.Path == "/status":
			answerJSON(w, 503, `{"error":{"code":503,"message":"PostgreSQL unavailable"}}`)
		case r.URL.Path == "/queues":
			answerJSON(w, 200, `not json`)
		default:
			http.NotFound(w, r)
		}
	})
	h := []string{"--http", f.URL}
	ctl(t, "", append(h, "status")...).expect(t, exitGateway,
		"queenctl: unauthorized: set --token or QUEEN_ADMIN_TOKEN (gateway answered 401: missing or wrong admin token)")
	ctl(t, "", append(h, "status", "--token", "bad")...).expect(t, exitGateway,
		"queenctl: unauthorized: the gateway refused the admin token: check --token or QUEEN_ADMIN_TOKEN")
	h = append(h, "--token", "good")
	ctl(t, "", append(h, "get", "queue", "ghost")...).expect(t, exitGateway, `queenctl: gateway answered 404: queue "ghost" not found`)
	ctl(t, "", append(h, "configure", "q")...).expect(t, exitGateway, `gateway answered 400: unknown option "x"`)
	ctl(t, "", append(h, "status")...).expect(t, exitGateway, "gateway answered 503: PostgreSQL unavailable")
	ctl(t, "", append(h, "get", "queues")...).expect(t, exitGateway, "unexpected answer from the gateway")
	// A route the gateway does not serve (an older gateway) is told apart
	// from an unknown queue; a dry run does not take it for "create".
	ctl(t, "", append(h, "get", "queue", "other")...).expect(t, exitGateway, "does not serve GET /queues/other: is it a queengate recent enough for queenctl?")
	ctl(t, "", append(h, "apply", "--dry-run", "-f", "../../testdata/manifests/queues.yaml")...).expect(t, exitGateway, `read queue "payments"`, "does not serve")

	// An invalid manifest sends nothing at all.
	before := f.requests()
	ctl(t, "", append(h, "apply", "-f", "../../testdata/manifests/invalid.yaml")...).expect(t, exitUsage, "nothing was sent")
	if f.requests() != before {
		t.Errorf("an invalid manifest sent %d requests", f.requests()-before)
	}
}

func TestApplyOverFakeGateway(t *testing.T) {
	t.Parallel()
	// Each queue is sent as is, with mode replace.
	f := newFakeGateway(t, func(w http.ResponseWriter, r *http.Request) {
		answerJSON(w, 200, `{"queue":"payments","options":{"dedupWindowSeconds":600,"retentionSeconds":86400},"created":true}`)
	})
	r := ctl(t, "", "--http", f.URL, "apply", "-f", "../../testdata/manifests/queues.yaml")
	r.expect(t, exitOK, "QUEUE", "RESULT", "created", "600 (10m)", "86400 (1d)")
	f.mu.Lock()
	bodies := append([]string(nil), f.body...)
	f.mu.Unlock()
	want := []string{
		`{"queue":"payments","options":{"dedupWindowSeconds":600,"retentionSeconds":86400},"mode":"replace"}`,
		`{"queue":"audit","options":{"dedupWindowSeconds":0},"mode":"replace"}`,
	}
	if !reflect.DeepEqual(bodies, want) {
		t.Errorf("bodies %q, want %q", bodies, want)
	}

	// The first queue is applied, the second refused: the error says
	// which were applied.
	var n int
	var mu sync.Mutex
	g := newFakeGateway(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		first := n == 1
		mu.Unlock()
		if first {
			answerJSON(w, 200, `{"queue":"payments","options":{"dedupWindowSeconds":600}}`)
			return
		}
		answerJSON(w, 503, `{"error":{"code":503,"message":"PostgreSQL unavailable"}}`)
	})
	ctl(t, "", "--http", g.URL, "apply", "-f", "../../testdata/manifests/queues.yaml").expect(t, exitGateway,
		`apply queue "audit": gateway answered 503: PostgreSQL unavailable; applied before it: payments`)
}

func TestUnreachableHTTP(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	ctl(t, "", "--http", addr, "status").expect(t, exitUnreachable,
		"queenctl: could not reach the gateway at http://"+addr+": dial tcp "+addr+": connect: connection refused; is queengate running there? (set --http or QUEENCTL_HTTP_URL)")

	slow := newFakeGateway(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})
	ctl(t, "", "--http", slow.URL, "--timeout", "100ms", "status").expect(t, exitUnreachable, "no answer from "+slow.URL+" within 100ms")

	ctl(t, "", "--nats", deadNATS, "status").expect(t, exitUnreachable, "could not reach NATS at "+deadNATS)
	ctl(t, "", "--nats", deadNATS, "push", "q", "p", "m").expect(t, exitUnreachable, "could not reach NATS at "+deadNATS)
}

// TestImportsOnlyTheWireContract keeps docs/design.md's rule: queenctl talks to
// gateways over the wire, and of this module depends only on the wire
// contract, the root package queengate (which imports only the JSON
// scanner its answer decoder reads over, internal/jsonscan), the consumer
// runner built on it alone, and its own parts under internal/ctl.
func TestImportsOnlyTheWireContract(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	const module, self = "github.com/queengate/queengate", "github.com/queengate/queengate/cmd/queenctl"
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, module+"/") && dep != self && dep != module+"/consumer" && dep != module+"/internal/jsonscan" &&
			!strings.HasPrefix(dep, module+"/internal/ctl/") {
			t.Errorf("queenctl depends on %s; it may use the wire contract only", dep)
		}
	}
}

// TestUsageLinesNameEveryFlag: each command's usage lines (its help up
// to the first blank line) name every flag the command takes, so that
// no option is found only in the flag list below.
func TestUsageLinesNameEveryFlag(t *testing.T) {
	t.Parallel()
	var all []*command
	for _, c := range commands() {
		all = append(all, c)
		all = append(all, c.Subs...)
	}
	for _, c := range all {
		if c.Setup == nil {
			continue
		}
		fs := flag.NewFlagSet(c.Name, flag.ContinueOnError)
		c.Setup(fs)
		lines, _, _ := strings.Cut(c.Usage, "\n\n")
		fs.VisitAll(func(f *flag.Flag) {
			if !regexp.MustCompile(`(^|[\s\[(|])--?` + regexp.QuoteMeta(f.Name) + `\b`).MatchString(lines) {
				t.Errorf("the usage lines of %q do not name --%s:\n%s", c.Name, f.Name, lines)
			}
		})
	}
}

// TestReadSaysWhatDeleted: a read from below the first offset stored
// blames retention only when the queue has any; status rounds its
// uptime to whole seconds.
func TestReadSaysWhatDeletedAndStatusRounds(t *testing.T) {
	t.Parallel()
	f := newFakeGateway(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/queues/kept/partitions/p/messages", "/queues/aged/partitions/p/messages":
			answerJSON(w, 200, `{"messages":[],"next":5,"firstOffset":5,"lastOffset":4,"purged":true}`)
		case "/queues/kept":
			answerJSON(w, 200, `{"queue":"kept","options":{"dedupWindowSeconds":3600,"retentionSeconds":0}}`)
		case "/queues/aged":
			answerJSON(w, 200, `{"queue":"aged","options":{"dedupWindowSeconds":3600,"retentionSeconds":86400}}`)
		case "/status":
			answerJSON(w, 200, `{"ready":true,"uptimeSeconds":687.099709213}`)
		default:
			http.NotFound(w, r)
		}
	})
	for queue, want := range map[string]string{
		"kept": "offsets below 5 were purged (the queue has no retention); reading from 5",
		"aged": "offsets below 5 are no longer stored (deleted by retention or a purge); reading from 5",
	} {
		if r := ctl(t, "", "--http", f.URL, "read", queue, "p"); r.code != exitOK || !strings.Contains(r.stderr, want) {
			t.Errorf("read %s: exit %d, stderr %q; want %q", queue, r.code, r.stderr, want)
		}
	}
	r := ctl(t, "", "--http", f.URL, "status")
	r.expect(t, exitOK, "uptimeSeconds:", "687 (11m27s)")
	if strings.Contains(r.stdout, "687.0") {
		t.Errorf("status prints the uptime unrounded:\n%s", r.stdout)
	}
}
