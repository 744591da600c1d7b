package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/zeebo/xxh3"
)

// queengateTarget pushes through running gateways over NATS, the way real
// producers do: request-reply, or fire-and-forget with the answers read on
// the ack subjects.
type queengateTarget struct {
	name       string
	noWindow   bool // the window0 target: queengate with deduplication off
	natsURL    string
	prefix     string
	adminAddrs []string      // gateways' admin HTTP, for /metrics
	pids       []int         // gateway processes, when queenbench started them
	pool       *pgxpool.Pool // to set the queues' window; nil for a remote gateway
	conns      []*nats.Conn
	w          Workload

	mu      sync.Mutex
	waiters map[uint64][]chan []Status // fire-and-forget: answers by id list
	subs    []*nats.Subscription
	mark    probeCounts
}

// probeCounts are the gateways' probe counters: segments by what their
// probe did, stored hashes it compared, and what full probes would have.
type probeCounts struct{ skipped, narrowed, full, off, unrolled, window float64 }

func (c probeCounts) minus(o probeCounts) probeCounts {
	return probeCounts{c.skipped - o.skipped, c.narrowed - o.narrowed, c.full - o.full, c.off - o.off,
		c.unrolled - o.unrolled, c.window - o.window}
}

func newQueengateTarget(ctx context.Context, natsURL, prefix, pgURL string, adminAddrs []string, pids []int) (*queengateTarget, error) {
	t := &queengateTarget{name: "queengate", natsURL: natsURL, prefix: prefix, adminAddrs: adminAddrs, pids: pids,
		waiters: map[uint64][]chan []Status{}}
	if pgURL != "" {
		pool, err := pgxpool.New(ctx, pgURL)
		if err != nil {
			return nil, fmt.Errorf("queengate target: %w", err)
		}
		t.pool = pool
	}
	// Producers share a few connections, as the clients of one process do;
	// one per eight producers keeps a connection's writer from being the
	// bottleneck.
	for range 8 {
		nc, err := nats.Connect(natsURL, nats.MaxReconnects(-1))
		if err != nil {
			t.Close()
			return nil, fmt.Errorf("queengate target: connect %s: %w", natsURL, err)
		}
		t.conns = append(t.conns, nc)
	}
	return t, nil
}

func (t *queengateTarget) Name() string { return t.name }

// Setup creates the run's queues with the workload's window (a queue
// created by its first push would get the default 3600 s), and for
// fire-and-forget subscribes to their ack subjects.
func (t *queengateTarget) Setup(ctx context.Context, w Workload) error {
	if t.noWindow {
		w.WindowSeconds = 0
	}
	t.w = w
	for _, s := range t.subs {
		_ = s.Unsubscribe()
	}
	t.subs = nil
	queues := make([]string, w.Queues)
	for q := range queues {
		queues[q] = fmt.Sprintf("bench-%s-q%d", w.RunID, q)
	}
	if t.pool != nil {
		if _, err := t.pool.Exec(ctx, `
			INSERT INTO queen.queues (name, dedup_window_seconds) SELECT unnest($1::text[]), $2
			ON CONFLICT (name) DO UPDATE SET dedup_window_seconds = EXCLUDED.dedup_window_seconds`,
			queues, w.WindowSeconds); err != nil {
			return fmt.Errorf("queengate target: create queues: %w", err)
		}
	} else if w.WindowSeconds != 3600 {
		return errors.New("queengate target: a window other than 3600 s needs --pg-url to configure the queues")
	}
	if w.FireAndForget {
		for _, q := range queues {
			for _, nc := range t.conns {
				sub, err := nc.Subscribe(t.prefix+".ack."+q+".>", t.onAck)
				if err != nil {
					return err
				}
				t.subs = append(t.subs, sub)
			}
		}
		for _, nc := range t.conns {
			if err := nc.Flush(); err != nil {
				return err
			}
		}
	}
	return t.markProbes(ctx)
}

func batchKey(ids []string) uint64 {
	h := xxh3.New()
	for _, id := range ids {
		_, _ = h.WriteString(id)
		_, _ = h.Write([]byte{0})
	}
	return h.Sum64()
}

func (t *queengateTarget) Send(ctx context.Context, producer int, b *Batch) ([]Status, error) {
	body := make([]byte, 0, len(b.IDs)*(len(b.Data[0])+48))
	body = append(body, '[')
	for i, id := range b.IDs {
		if i > 0 {
			body = append(body, ',')
		}
		body = append(body, `{"transactionId":"`...)
		body = append(body, id...)
		body = append(body, `","data":`...)
		body = append(body, b.Data[i]...)
		body = append(body, '}')
	}
	body = append(body, ']')
	subject := t.prefix + ".push." + b.Queue + "." + b.Partition
	nc := t.conns[producer%len(t.conns)]
	if !t.w.FireAndForget {
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		msg, err := nc.RequestWithContext(ctx, subject, body)
		if err != nil {
			return nil, err
		}
		if code := msg.Header.Get("Nats-Service-Error-Code"); code != "" {
			return nil, fmt.Errorf("rejected %s: %s", code, msg.Header.Get("Nats-Service-Error"))
		}
		return parseStatuses(msg.Data, len(b.IDs))
	}
	ch := make(chan []Status, 1)
	key := batchKey(b.IDs)
	t.mu.Lock()
	t.waiters[key] = append(t.waiters[key], ch)
	t.mu.Unlock()
	if err := nc.Publish(subject, body); err != nil {
		return nil, err
	}
	select {
	case s := <-ch:
		return s, nil
	case <-time.After(time.Minute):
		return nil, errors.New("no ack within a minute")
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// onAck hands an ack to the oldest request with the same id list.
func (t *queengateTarget) onAck(m *nats.Msg) {
	ids, statuses, err := parseAnswers(m.Data)
	if err != nil {
		return // a whole-request rejection names no ids: its sender times out
	}
	key := batchKey(ids)
	t.mu.Lock()
	q := t.waiters[key]
	var ch chan []Status
	if len(q) > 0 {
		ch = q[0]
		if len(q) == 1 {
			delete(t.waiters, key)
		} else {
			t.waiters[key] = q[1:]
		}
	}
	t.mu.Unlock()
	if ch != nil {
		ch <- statuses
	}
}

var statusWord = map[string]Status{"queued": StatusQueued, "duplicate": StatusDuplicate, "failed": StatusFailed}

// parseStatuses reads the statuses of an answer array in order, without a
// full JSON decode: queenbench's own ids never contain quotes.
func parseStatuses(data []byte, want int) ([]Status, error) {
	const statusKey = `"status":"`
	s := make([]Status, 0, want)
	for rest := data; ; {
		k := bytes.Index(rest, []byte(statusKey))
		if k < 0 {
			break
		}
		rest = rest[k+len(statusKey):]
		e := bytes.IndexByte(rest, '"')
		if e < 0 {
			return nil, errors.New("malformed answer")
		}
		st, ok := statusWord[string(rest[:e])]
		if !ok {
			return nil, fmt.Errorf("unknown status %q", rest[:e])
		}
		s = append(s, st)
	}
	if len(s) != want {
		return nil, fmt.Errorf("%d answers for %d messages", len(s), want)
	}
	return s, nil
}

func parseAnswers(data []byte) (ids []string, statuses []Status, err error) {
	const idKey, statusKey = `"transactionId":"`, `"status":"`
	rest := data
	for {
		i := bytes.Index(rest, []byte(idKey))
		if i < 0 {
			break
		}
		rest = rest[i+len(idKey):]
		j := bytes.IndexByte(rest, '"')
		if j < 0 {
			return nil, nil, errors.New("malformed answer")
		}
		ids = append(ids, string(rest[:j]))
		k := bytes.Index(rest, []byte(statusKey))
		if k < 0 {
			return nil, nil, errors.New("malformed answer")
		}
		rest = rest[k+len(statusKey):]
		e := bytes.IndexByte(rest, '"')
		if e < 0 {
			return nil, nil, errors.New("malformed answer")
		}
		st, ok := statusWord[string(rest[:e])]
		if !ok {
			return nil, nil, fmt.Errorf("unknown status %q", rest[:e])
		}
		statuses = append(statuses, st)
	}
	if len(statuses) == 0 {
		return nil, nil, errors.New("no answers")
	}
	return ids, statuses, nil
}

// markProbes notes the gateways' probe counters, so Figures reports the
// shares of segments whose probe was skipped or narrowed, and of the
// window unrolled, from here on.
func (t *queengateTarget) markProbes(ctx context.Context) error {
	c, err := t.probeCounts(ctx)
	t.mark = c
	return err
}

func (t *queengateTarget) probeCounts(ctx context.Context) (probeCounts, error) {
	var c probeCounts
	for _, addr := range t.adminAddrs {
		m, err := scrapeMetrics(ctx, addr)
		if err != nil {
			return c, err
		}
		c.skipped += m[`queengate_probes_total{probe="skipped"}`]
		c.narrowed += m[`queengate_probes_total{probe="narrowed"}`]
		c.full += m[`queengate_probes_total{probe="full"}`]
		c.off += m[`queengate_probes_total{probe="off"}`]
		c.unrolled += m["queengate_probe_unrolled_hashes_total"]
		c.window += m["queengate_probe_window_hashes_total"]
	}
	return c, nil
}

// Figures sums the gateways' CPU and takes their largest peak RSS, from
// /proc when queenbench started them and from /metrics otherwise.
func (t *queengateTarget) Figures(ctx context.Context) (Figures, error) {
	f := Figures{ProbeSkippedShare: -1, ProbeNarrowedShare: -1, UnrolledShare: -1, CacheBytesPerHash: -1}
	if len(t.pids) > 0 {
		for _, pid := range t.pids {
			cpu, err := procCPUSeconds(pid)
			if err != nil {
				return f, err
			}
			rss, err := procPeakRSS(pid)
			if err != nil {
				return f, err
			}
			f.ServerCPUSeconds += cpu
			f.PeakRSSBytes = max(f.PeakRSSBytes, rss)
		}
	}
	var cacheBytes, cacheHashes float64
	for _, addr := range t.adminAddrs {
		m, err := scrapeMetrics(ctx, addr)
		if err != nil {
			return f, err
		}
		if len(t.pids) == 0 {
			f.ServerCPUSeconds += m["process_cpu_seconds_total"]
			f.PeakRSSBytes = max(f.PeakRSSBytes, int64(m["process_resident_memory_bytes"]))
		}
		cacheBytes += m["queengate_dedup_cache_resident_bytes"]
		cacheHashes += m["queengate_dedup_cache_resident_hashes"]
	}
	if c, err := t.probeCounts(ctx); err == nil {
		d := c.minus(t.mark)
		if total := d.skipped + d.narrowed + d.full; total > 0 {
			f.ProbeSkippedShare, f.ProbeNarrowedShare = d.skipped/total, d.narrowed/total
		}
		if d.window > 0 {
			f.UnrolledShare = d.unrolled / d.window
		}
	}
	if cacheHashes > 0 {
		f.CacheBytesPerHash = cacheBytes / cacheHashes
	}
	return f, nil
}

func (t *queengateTarget) Close() error {
	for _, nc := range t.conns {
		nc.Close()
	}
	if t.pool != nil {
		t.pool.Close()
	}
	return nil
}

// scrapeMetrics reads a Prometheus text exposition into name{labels} ->
// value.
func scrapeMetrics(ctx context.Context, addr string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s/metrics: %s", addr, resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err == nil {
			out[line[:i]] = v
		}
	}
	return out, sc.Err()
}
