package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/internal/pgtest"
)

// chromium finds Debian's headless browser; QUEEN_CHROMIUM overrides.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("QUEEN_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no headless browser: install Debian's chromium (.ci/run does) or set QUEEN_CHROMIUM")
	return ""
}

// TestStatusPageInABrowser loads the admin root in a real headless
// Chromium, lets its script call the API, and checks the rendered page:
// the queue, its partition's figures and the messages of the partition
// the link names, their data byte for byte as stored. QUEEN_STATUS_SCREENSHOT=path also saves a screenshot.
func TestStatusPageInABrowser(t *testing.T) {
	t.Parallel()
	browser := chromium(t)
	d := startDaemon(t, "", "QUEEN_PG_URL="+pgtest.NewDB(t))
	nc, err := nats.Connect(d.natsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	// inv-3's data is shown as stored: JSON.parse would round the number
	// and write 1.0 as 1.
	exact := `{"n":12345678901234567890, "b": 1.0}`
	for _, body := range []string{`[{"transactionId":"inv-1","data":{"total":12}},{"transactionId":"inv-2","data":{"total":7}},` +
		`{"transactionId":"inv-3","data":` + exact + `}]`,
		`{"transactionId":"inv-1","data":{"total":12}}`} {
		if _, err := nc.Request("queen.push.invoices.eu", []byte(body), 10*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	// A consumer group that has consumed one of the two: lag 1.
	c, err := queengate.NewClient(nc)
	if err != nil {
		t.Fatal(err)
	}
	a, err := c.Pop(t.Context(), "invoices", "eu", queengate.PopRequest{Group: "billing", Max: 1})
	if err != nil || len(a.Messages) != 1 {
		t.Fatalf("pop: %+v, %v", a, err)
	}
	if _, err := c.Ack(t.Context(), "invoices", "eu", queengate.AckRequest{Group: "billing", LeaseID: a.LeaseID,
		Items: []queengate.AckItem{{TransactionID: "inv-1", Status: queengate.AckCompleted}}}); err != nil {
		t.Fatal(err)
	}
	page := "http://" + d.httpAddr + "/#queue=invoices&partition=eu&from=0"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := []string{"--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=" + t.TempDir(),
		"--virtual-time-budget=5000", "--window-size=1280,900"}
	dom, err := exec.CommandContext(ctx, browser, append(args, "--dump-dom", page)...).Output()
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	html := string(dom)
	for _, want := range []string{"invoices", "Partitions of invoices", "Messages of invoices / eu", "inv-1", "inv-2",
		`{"total":12}`, exact, "vouching", "ready", "Consumer groups of invoices", `<td><span class="t">billing</span></td>`} {
		if !strings.Contains(html, want) {
			t.Errorf("the rendered page lacks %q", want)
		}
	}
	if strings.Contains(html, `id="error">4`) || strings.Contains(html, `id="error">5`) {
		t.Errorf("the page shows an API error:\n%.3000s", html)
	}
	if shot := os.Getenv("QUEEN_STATUS_SCREENSHOT"); shot != "" {
		abs, _ := filepath.Abs(shot)
		if out, err := exec.CommandContext(ctx, browser, append(args, "--screenshot="+abs, page)...).CombinedOutput(); err != nil {
			t.Errorf("screenshot: %v\n%s", err, out)
		}
	}
}
