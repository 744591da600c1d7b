package operator_test

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/ingest"
	"github.com/queengate/queengate/internal/checkfor"
)

// pageView is what the status page shows: each queue row's figures, the
// selected queue's, and its address.
type pageView struct {
	Hash, Title, Error        string
	Stored, DLQ, Lag, Delayed string
	NotReloaded               bool
	Rows                      map[string]map[string]string
}

// readPage is the expression that reads a pageView off the page.
const readPage = `(() => {
  const $ = id => document.getElementById(id);
  const rows = {};
  for (const tr of document.querySelectorAll("#queues tr[data-queue]")) {
    const f = {};
    for (const td of tr.querySelectorAll("td[data-figure]")) f[td.dataset.figure] = td.textContent;
    const svg = tr.querySelector("svg.chart");
    f.chartPoints = svg ? svg.dataset.points : "";
    rows[tr.dataset.queue] = f;
  }
  return { Hash: location.hash, Title: $("queueBox").hidden ? "" : $("queueTitle").textContent, Error: $("error").textContent,
    Stored: $("selStored").textContent, DLQ: $("selDlq").textContent, Lag: $("selLag").textContent,
    Delayed: $("selDelayed").textContent, NotReloaded: window.notReloaded === true, Rows: rows };
})()`

// view reads the page.
func (b *browser) view() (pageView, error) {
	var v pageView
	err := b.eval(readPage, &v)
	return v, err
}

// rowFigures are the figures the page's row of q must show, as the page
// writes them.
func rowFigures(q queengate.QueueOverview, sampleSeconds float64) map[string]string {
	rate := func(n int64) string {
		x := float64(n) / sampleSeconds
		if x < 10 {
			return fmt.Sprintf("%.1f", x)
		}
		return fmt.Sprintf("%.0f", x)
	}
	var pushes, dups int64
	if len(q.History) > 0 {
		h := q.History[len(q.History)-1]
		pushes, dups = h.Queued+h.Duplicates+h.Failed, h.Duplicates
	}
	var groups []string
	for _, g := range q.Groups[:min(3, len(q.Groups))] {
		groups = append(groups, fmt.Sprintf("%s %d", g.Group, g.Lag))
	}
	return map[string]string{"partitions": fmt.Sprint(q.Partitions), "storedMessages": fmt.Sprint(q.StoredMessages),
		"pushRate": rate(pushes), "duplicateRate": rate(dups), "groups": strings.Join(groups, ", "),
		"dlqDepth": fmt.Sprint(q.DLQDepth), "delayed": fmt.Sprint(q.Delayed), "chartPoints": fmt.Sprint(len(q.History))}
}

// sameAsAPI says how the page's row and selected figures of queue differ
// from the overview's; "" when they agree.
func (g *opsGateway) sameAsAPI(t *testing.T, v pageView, queue string) string {
	t.Helper()
	o := g.overview(t, queue)
	q := o.Queues[0]
	want := rowFigures(q, o.SampleSeconds)
	if got := v.Rows[queue]; fmt.Sprint(got) != fmt.Sprint(want) {
		return fmt.Sprintf("row of %s shows %v, the API says %v", queue, got, want)
	}
	lag := "no groups"
	if len(q.Groups) > 0 {
		lag = fmt.Sprintf("%d (%s)", q.Groups[0].Lag, q.Groups[0].Group)
	}
	if v.Title != "Queue "+queue || v.Stored != fmt.Sprint(q.StoredMessages) || v.DLQ != fmt.Sprint(q.DLQDepth) || v.Lag != lag ||
		v.Delayed != fmt.Sprint(q.Delayed) {
		return fmt.Sprintf("selected: %q stored %s, dead letters %s, lag %s, delayed %s; the API says %s, %d, %d, %s, %d",
			v.Title, v.Stored, v.DLQ, v.Lag, v.Delayed, queue, q.StoredMessages, q.DLQDepth, lag, q.Delayed)
	}
	return ""
}

// waitForPage waits until the page shows what ok accepts.
func (b *browser) waitForPage(t *testing.T, what string, ok func(pageView) string) pageView {
	t.Helper()
	var v pageView
	checkfor.Check(t, 20*time.Second, func() error {
		var err error
		if v, err = b.view(); err != nil {
			return err
		}
		if v.Error != "" {
			return fmt.Errorf("the page says %q", v.Error)
		}
		if why := ok(v); why != "" {
			return fmt.Errorf("%s: %s", what, why)
		}
		return nil
	})
	return v
}

// The status page, in a real browser against a real gateway, shows per
// queue the figures the overview answers (stored, rates, chart, groups
// with lag, dead letters), keeps the selected queue in its address
// through a reload and back, and refreshes itself: a push after it
// loaded shows up without a reload.
func TestStatusPageShowsTheOverviewAndRefreshes(t *testing.T) {
	t.Parallel()
	b := startBrowser(t)
	e := newEnv(t)
	g := e.startOpsGateway("", ingest.Config{})
	q1, q2 := e.Queue, e.Queue+"-b"
	g.fillQueue(t)
	wantStatus(t, e.Push(t, e.Prefix+".push."+q2+".p", msgs("x")), "queued")

	b.navigate(g.HTTP + "/#queue=" + url.QueryEscape(q1))
	v := b.waitForPage(t, "the figures of "+q1, func(v pageView) string { return g.sameAsAPI(t, v, q1) })
	if v.Hash != "#queue="+q1 || v.Delayed != "2" {
		t.Errorf("address %q, delayed %q (want the 2 messages a delay holds from group slow)", v.Hash, v.Delayed)
	}
	b.waitForPage(t, "the figures of "+q2, func(v pageView) string {
		o := g.overview(t, q2)
		if got, want := v.Rows[q2], rowFigures(o.Queues[0], o.SampleSeconds); fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Sprintf("row of %s shows %v, the API says %v", q2, got, want)
		}
		return ""
	})

	// Selecting a queue puts it in the address; a reload keeps it, back
	// returns to the one before.
	if err := b.eval(`document.querySelector('#queues tr[data-queue="`+q2+`"]').click()`, nil); err != nil {
		t.Fatal(err)
	}
	selected := func(queue string) func(pageView) string {
		return func(v pageView) string {
			if v.Hash != "#queue="+queue || v.Title != "Queue "+queue {
				return fmt.Sprintf("address %q, title %q", v.Hash, v.Title)
			}
			return ""
		}
	}
	b.waitForPage(t, q2+" selected", selected(q2))
	b.call("Page.reload", map[string]any{}, nil)
	b.waitForPage(t, q2+" selected after a reload", selected(q2))
	if err := b.eval(`history.back()`, nil); err != nil {
		t.Fatal(err)
	}
	b.waitForPage(t, q1+" selected after back", func(v pageView) string { return g.sameAsAPI(t, v, q1) })

	// It refreshes itself.
	if err := b.eval(`window.notReloaded = true`, nil); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, e.Push(t, e.Subject("p2"), msgs("d", "e")), "queued", "queued")
	v = b.waitForPage(t, "the push after the page loaded", func(v pageView) string {
		if v.Rows[q1]["storedMessages"] != "5" || v.Rows[q1]["partitions"] != "2" {
			return fmt.Sprintf("row of %s: %v", q1, v.Rows[q1])
		}
		return g.sameAsAPI(t, v, q1)
	})
	if !v.NotReloaded {
		t.Error("the page was reloaded to show the push")
	}
}

// The status page never scrolls sideways at 1400 and 1024 px, in any of
// its views (queues, a queue selected, a partition's messages), even
// when a message's data is a long run of punctuation no line breaking
// rule breaks (`[[[…`, 500 deep), its transactionId is long and
// unbroken, and names are as long as names go. An empty chart says it
// has no data instead of a scale over 0 s.
func TestStatusPageFitsTheWindow(t *testing.T) {
	t.Parallel()
	b := startBrowser(t)
	e := newEnv(t)
	g := e.startOpsGateway("", ingest.Config{})
	g.fillQueue(t)
	long := strings.Repeat("p", 128)
	deep := strings.Repeat("[", 500) + strings.Repeat("]", 500)
	body := fmt.Sprintf(`[{"transactionId":%q,"data":%s},{"transactionId":"t-2","data":%q}]`,
		strings.Repeat("x", 256), deep, strings.Repeat("-", 2000))
	wantStatus(t, e.Push(t, e.Subject(long), body), "queued", "queued")
	views := map[string]string{
		"the queues":       "/",
		"a queue":          "/#queue=" + url.QueryEscape(e.Queue),
		"the messages":     "/#" + url.Values{"queue": {e.Queue}, "partition": {long}, "from": {"0"}}.Encode(),
		"plain partitions": "/#" + url.Values{"queue": {e.Queue}, "partition": {"p"}, "from": {"0"}}.Encode(),
	}
	for _, width := range []int{1400, 1024} {
		b.call("Emulation.setDeviceMetricsOverride", map[string]any{"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": false}, nil)
		for name, path := range views {
			b.navigate(g.HTTP + path)
			checkfor.Check(t, 20*time.Second, func() error {
				var v struct {
					Loaded                   bool
					ScrollWidth, ClientWidth int
					Wide                     []string // sections that scroll sideways inside
				}
				err := b.eval(`(() => {
  const browsing = location.hash.includes("partition=");
  const loaded = document.querySelectorAll("#queues tr[data-queue]").length > 0 &&
    (!location.hash.includes("queue=") || document.querySelectorAll("#partitions tr").length > 1) &&
    (!browsing || document.querySelectorAll("#messages pre").length > 0);
  const wide = [...document.querySelectorAll("section")].filter(s => !s.hidden && s.scrollWidth > s.clientWidth)
    .map(s => s.querySelector("h2").textContent.slice(0, 40) + ": " + s.scrollWidth + " px in " + s.clientWidth);
  return { Loaded: loaded, ScrollWidth: document.documentElement.scrollWidth, ClientWidth: document.documentElement.clientWidth, Wide: wide };
})()`, &v)
				switch {
				case err != nil:
					return err
				case !v.Loaded:
					return fmt.Errorf("%s at %d px: not loaded yet", name, width)
				case v.ScrollWidth > v.ClientWidth:
					return fmt.Errorf("%s at %d px: the page is %d px wide, the window %d: it scrolls sideways", name, width, v.ScrollWidth, v.ClientWidth)
				case len(v.Wide) > 0:
					return fmt.Errorf("%s at %d px: sections scroll sideways: %q", name, width, v.Wide)
				}
				return nil
			})
		}
	}
	var label string
	if err := b.eval(`chart([], 5, 600, 120).textContent`, &label); err != nil {
		t.Fatal(err)
	}
	if label != "no data yet" {
		t.Errorf("an empty chart is labelled %q; want \"no data yet\"", label)
	}
}
