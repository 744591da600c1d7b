package target

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/zeebo/xxh3"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/internal/bench"
	"github.com/queengate/queengate/internal/bench/proc"
	"github.com/queengate/queengate/model"
)

// Queengate pushes through running gateways over NATS, the way real
// producers do: request-reply, or fire-and-forget with the answers read on
// the ack subjects.
type Queengate struct {
	name     string
	NoWindow bool // the window0 target: queengate with deduplication off
	Headers  int  // the headers3 target: this many headers on every message, whatever the workload says
	gateways int  // the fleet's size, when queenbench runs it (queengate@N)
	fleet    *proc.Self
	natsURL  string
	subjects queengate.Subjects
	pool     *pgxpool.Pool // to set the queues' window; nil for a remote gateway
	conns    []*nats.Conn
	w        bench.Workload
	// pubs are the JetStream clients of conns, for Workload.JSPublish;
	// headers the "headers" member of every pushed message (none: empty).
	pubs    []jetstream.JetStream
	headers [][2]string
	members []byte

	mu      sync.Mutex
	waiters map[uint64][]chan []model.Status // fire-and-forget: answers by id list
	subs    []*nats.Subscription
	// The processes and gateways measured this run (a killed one stays,
	// at its last figures), and the counters at the run's start.
	adminAddrs  []string
	pids        []int
	gatewayPIDs []int // of pids, the gateways' (not their NATS server's)
	lastCPU     map[int]float64
	lastScrape  map[string]map[string]float64
	// missingMetrics: gateways whose /metrics never answered (said once).
	missingMetrics map[string]bool
	mark           gatewayCounters
	storedMark     StoredLog
}

// gatewayCounters are the gateways' counters queenbench reads, summed:
// frames by what their probe did, stored hashes compared and what full
// probes would have, cache hydrations, fills and evictions, and the
// messages and frames flushed.
type gatewayCounters struct {
	skipped, narrowed, full, off, unrolled, window    float64
	hydrations, fills, flushedMessages, flushedFrames float64
	evictions, births                                 float64
}

func (c gatewayCounters) minus(o gatewayCounters) gatewayCounters {
	return gatewayCounters{c.skipped - o.skipped, c.narrowed - o.narrowed, c.full - o.full, c.off - o.off,
		c.unrolled - o.unrolled, c.window - o.window, c.hydrations - o.hydrations, c.fills - o.fills,
		c.flushedMessages - o.flushedMessages, c.flushedFrames - o.flushedFrames, c.evictions - o.evictions,
		c.births - o.births}
}

func (c *gatewayCounters) add(m map[string]float64) {
	c.skipped += m[`queengate_probes_total{probe="skipped"}`]
	c.narrowed += m[`queengate_probes_total{probe="narrowed"}`]
	c.full += m[`queengate_probes_total{probe="full"}`]
	c.off += m[`queengate_probes_total{probe="off"}`]
	c.unrolled += m["queengate_probe_unrolled_hashes_total"]
	c.window += m["queengate_probe_window_hashes_total"]
	c.hydrations += m["queengate_dedup_hydrations_total"]
	c.fills += m["queengate_dedup_fills_total"]
	c.evictions += m["queengate_dedup_evictions_total"]
	c.births += m["queengate_dedup_births_total"]
	c.flushedMessages += m["queengate_flush_messages_sum"]
	c.flushedFrames += m["queengate_flush_frames_sum"]
}

// NewQueengate connects to gateways: those of fleet, resized to
// gateways by each Setup, or running ones (fleet nil) at natsURL with their
// admin addresses.
func NewQueengate(ctx context.Context, name string, gateways int, fleet *proc.Self, natsURL, prefix, pgURL string, adminAddrs []string) (*Queengate, error) {
	t := &Queengate{name: name, gateways: gateways, fleet: fleet, natsURL: natsURL, subjects: queengate.Subjects{Prefix: prefix},
		adminAddrs: adminAddrs, waiters: map[uint64][]chan []model.Status{}}
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

func (t *Queengate) Name() string { return t.name }

// Setup creates the run's queues with the workload's window (a queue
// created by its first push would get the default 3600 s), and for
// fire-and-forget subscribes to their ack subjects.
func (t *Queengate) Setup(ctx context.Context, w bench.Workload) error {
	if t.NoWindow {
		w.WindowSeconds = 0
	}
	if t.Headers > 0 {
		w.Headers = t.Headers
	}
	t.w = w
	if t.fleet != nil {
		if err := t.fleet.Resize(ctx, t.gateways); err != nil {
			return fmt.Errorf("queengate target: %d gateways: %w", t.gateways, err)
		}
		t.adminAddrs, t.pids, t.gatewayPIDs = t.fleet.AdminAddrs(), t.fleet.PIDs(), t.fleet.GatewayPIDs()
	}
	t.lastCPU, t.lastScrape, t.missingMetrics = map[int]float64{}, map[string]map[string]float64{}, map[string]bool{}
	t.headers, t.members, t.pubs = bench.MessageHeaders(w.Headers), headersMember(bench.MessageHeaders(w.Headers)), nil
	if w.JSPublish {
		for _, nc := range t.conns {
			js, err := asyncPublisher(nc, w)
			if err != nil {
				return fmt.Errorf("queengate target: %w", err)
			}
			t.pubs = append(t.pubs, js)
		}
	}
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
				sub, err := nc.Subscribe(t.subjects.Verb(queengate.APIPushAnswer)+"."+q+".>", t.onAck)
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
	return t.MarkCounters(ctx)
}

func batchKey(ids []string) uint64 {
	h := xxh3.New()
	for _, id := range ids {
		_, _ = h.WriteString(id)
		_, _ = h.Write([]byte{0})
	}
	return h.Sum64()
}

// headersMember is the ,"headers":{…} member of a pushed message with
// headers; empty for none.
func headersMember(headers [][2]string) []byte {
	if len(headers) == 0 {
		return nil
	}
	b := []byte(`,"headers":{`)
	for i, h := range headers {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(append(append(b, strconv.Quote(h[0])...), ':'), strconv.Quote(h[1])...)
	}
	return append(b, '}')
}

func (t *Queengate) Send(ctx context.Context, producer int, b *bench.Batch) ([]model.Status, error) {
	if t.w.JSPublish {
		return publishAsync(ctx, t.pubs[producer%len(t.pubs)], t.subjects.JetStream(b.Queue, b.Partition), "", b, t.headers)
	}
	body := make([]byte, 0, len(b.IDs)*(len(b.Data[0])+48+len(t.members)))
	body = append(body, '[')
	for i, id := range b.IDs {
		if i > 0 {
			body = append(body, ',')
		}
		body = append(body, `{"transactionId":"`...)
		body = append(body, id...)
		body = append(body, `","data":`...)
		body = append(body, b.Data[i]...)
		body = append(body, t.members...)
		body = append(body, '}')
	}
	body = append(body, ']')
	subject := t.subjects.Push(b.Queue, b.Partition)
	nc := t.conns[producer%len(t.conns)]
	if !t.w.FireAndForget {
		ctx, cancel := context.WithTimeout(ctx, t.w.AttemptTimeout())
		defer cancel()
		msg, err := nc.RequestWithContext(ctx, subject, body)
		if err != nil {
			return nil, err
		}
		if code := msg.Header.Get(queengate.HeaderErrorCode); code != "" {
			return nil, fmt.Errorf("rejected %s: %s", code, msg.Header.Get(queengate.HeaderError))
		}
		return parseStatuses(msg.Data, len(b.IDs))
	}
	ch := make(chan []model.Status, 1)
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
	case <-time.After(t.w.AttemptTimeout()):
		return nil, fmt.Errorf("no ack within %v", t.w.AttemptTimeout())
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// onAck hands an ack to the oldest request with the same id list.
func (t *Queengate) onAck(m *nats.Msg) {
	ids, statuses, err := parseAnswers(m.Data)
	if err != nil {
		return // a whole-request rejection names no ids: its sender times out
	}
	key := batchKey(ids)
	t.mu.Lock()
	q := t.waiters[key]
	var ch chan []model.Status
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

// statusWord reads the wire's statuses into queenbench's compact ones.
var statusWord = map[string]model.Status{
	string(queengate.StatusQueued):    model.StatusQueued,
	string(queengate.StatusDuplicate): model.StatusDuplicate,
	string(queengate.StatusFailed):    model.StatusFailed,
}

// parseStatuses reads the statuses of an answer array in order, without a
// full JSON decode: queenbench's own ids never contain quotes.
func parseStatuses(data []byte, want int) ([]model.Status, error) {
	const statusKey = `"status":"`
	s := make([]model.Status, 0, want)
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

func parseAnswers(data []byte) (ids []string, statuses []model.Status, err error) {
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

// MarkCounters notes the gateways' counters, so Figures reports what
// happened from here on (after a prefill, the steady state).
func (t *Queengate) MarkCounters(ctx context.Context) error {
	c, err := t.counters(ctx)
	t.mark = c
	if err != nil || t.pool == nil {
		return err
	}
	t.storedMark, err = MeasureStoredLog(ctx, t.pool)
	return err
}

// StoredLog is what the log takes in PostgreSQL: the bytes of its tables
// (heap, TOAST and indexes of log_segments and log_txns) and the messages
// they hold, every queue's.
type StoredLog struct{ Bytes, Messages int64 }

// MeasureStoredLog reads the log's size and message count from the
// database behind pool.
func MeasureStoredLog(ctx context.Context, pool *pgxpool.Pool) (StoredLog, error) {
	var s StoredLog
	err := pool.QueryRow(ctx, `SELECT pg_total_relation_size('queen.log_segments') + pg_total_relation_size('queen.log_txns'),
		(SELECT coalesce(sum(end_offset - base_offset + 1), 0) FROM queen.log_segments)::bigint`).Scan(&s.Bytes, &s.Messages)
	if err != nil {
		return s, fmt.Errorf("queengate target: the log's size: %w", err)
	}
	return s, nil
}

// BytesPerMessage is what the log grew by per message stored since mark,
// -1 when none was.
func (s StoredLog) BytesPerMessage(mark StoredLog) float64 {
	if s.Messages <= mark.Messages {
		return -1
	}
	return float64(s.Bytes-mark.Bytes) / float64(s.Messages-mark.Messages)
}

// scrape reads a gateway's metrics; a gateway that is gone (killed by the
// failover scenario) keeps its last figures.
func (t *Queengate) scrape(ctx context.Context, addr string) (map[string]float64, error) {
	m, err := ScrapeMetrics(ctx, addr)
	if err == nil {
		t.lastScrape[addr] = m
		return m, nil
	}
	if last, ok := t.lastScrape[addr]; ok {
		return last, nil
	}
	// A gateway killed (or not up yet) before its first scrape: the run
	// goes on without its figures rather than ending.
	if !t.missingMetrics[addr] {
		t.missingMetrics[addr] = true
		fmt.Fprintf(os.Stderr, "queenbench: no metrics from %s (%v): its figures are left out\n", addr, err)
	}
	return map[string]float64{}, nil
}

func (t *Queengate) counters(ctx context.Context) (gatewayCounters, error) {
	var c gatewayCounters
	for _, addr := range t.adminAddrs {
		m, err := t.scrape(ctx, addr)
		if err != nil {
			return c, err
		}
		c.add(m)
	}
	return c, nil
}

// cpu is a process's CPU seconds; a process that is gone keeps its last.
func (t *Queengate) cpu(pid int) (float64, error) {
	cpu, err := proc.CPUSeconds(pid)
	if err == nil {
		t.lastCPU[pid] = cpu
		return cpu, nil
	}
	if last, ok := t.lastCPU[pid]; ok {
		return last, nil
	}
	return 0, err
}

// KillOne kills one gateway of the fleet outright (the failover scenario),
// after reading its figures one last time.
func (t *Queengate) KillOne(ctx context.Context) error {
	if t.fleet == nil || t.fleet.Size() < 2 {
		return errors.New("the failover scenario needs --self and at least two gateways")
	}
	victim := t.fleet.Size() / 2
	adminAddr, pid := t.fleet.Gateway(victim)
	if _, err := t.scrape(ctx, adminAddr); err != nil {
		return err
	}
	if _, err := t.cpu(pid); err != nil {
		return err
	}
	return t.fleet.Kill(victim)
}

// Figures sums the gateways' CPU (and the NATS server's, when queenbench
// runs it) and takes their largest peak RSS, from /proc when queenbench
// started them and from /metrics otherwise.
func (t *Queengate) Figures(ctx context.Context) (bench.Figures, error) {
	f := bench.UnknownFigures()
	for _, pid := range t.pids {
		cpu, err := t.cpu(pid)
		if err != nil {
			return f, err
		}
		f.ServerCPUSeconds += cpu
		if rss, err := proc.PeakRSS(pid); err == nil {
			f.PeakRSSBytes = max(f.PeakRSSBytes, rss)
			if slices.Contains(t.gatewayPIDs, pid) {
				f.GatewayPeakRSSBytes = max(f.GatewayPeakRSSBytes, rss)
			}
		}
	}
	var cacheBytes, cacheHashes, cacheEntries, suppressed float64
	var c gatewayCounters
	for _, addr := range t.adminAddrs {
		m, err := t.scrape(ctx, addr)
		if err != nil {
			return f, err
		}
		if len(t.pids) == 0 {
			f.ServerCPUSeconds += m["process_cpu_seconds_total"]
			f.PeakRSSBytes = max(f.PeakRSSBytes, int64(m["process_resident_memory_bytes"]))
		}
		cacheBytes += m["queengate_dedup_cache_resident_bytes"]
		cacheHashes += m["queengate_dedup_cache_resident_hashes"]
		cacheEntries += m["queengate_dedup_cache_entries"]
		suppressed += m["queengate_dedup_suppressed_partitions"]
		c.add(m)
	}
	d := c.minus(t.mark)
	if total := d.skipped + d.narrowed + d.full; total > 0 {
		f.ProbeSkippedShare, f.ProbeNarrowedShare = d.skipped/total, d.narrowed/total
	}
	if d.window > 0 {
		f.UnrolledShare = d.unrolled / d.window
	}
	if d.flushedFrames > 0 {
		f.MeanFrame = d.flushedMessages / d.flushedFrames
	}
	f.Hydrations, f.Fills, f.Evictions = int64(d.hydrations), int64(d.fills), int64(d.evictions)
	f.Births = int64(d.births)
	if len(t.adminAddrs) > 0 {
		f.Suppressed = int64(suppressed)
	}
	if cacheHashes > 0 {
		f.CacheBytesPerHash = cacheBytes / cacheHashes
	}
	if cacheEntries > 0 {
		f.CacheBytesPerEntry = cacheBytes / cacheEntries
	}
	if t.pool != nil {
		stored, err := MeasureStoredLog(ctx, t.pool)
		if err != nil {
			return f, err
		}
		f.StoredBytesPerMessage = stored.BytesPerMessage(t.storedMark)
	}
	return f, nil
}

// CanSayWhatItStored is whether StoredIDs can read the store: given a
// PostgreSQL URL.
func (t *Queengate) CanSayWhatItStored() bool { return t.pool != nil }

// StoredIDs counts, from PostgreSQL, the transactionIds stored in the
// run's queues, and how many of them are stored more than once.
func (t *Queengate) StoredIDs(ctx context.Context) (distinct, doubled int64, err error) {
	if t.pool == nil {
		return 0, 0, errors.New("checking what is stored needs --pg-url (or --self)")
	}
	queues := make([]string, t.w.Queues)
	for q := range queues {
		queues[q] = fmt.Sprintf("bench-%s-q%d", t.w.RunID, q)
	}
	err = t.pool.QueryRow(ctx, `
		SELECT count(DISTINCT (p.id, th.h)), count(*) - count(DISTINCT (p.id, th.h))
		  FROM queen.queues q
		  JOIN queen.log_partitions p ON p.queue_id = q.id
		 CROSS JOIN LATERAL queen.log_hashes(p.id, -1, p.txns_start, p.txns_end) AS t
		 CROSS JOIN LATERAL queen.log_unnest_hashes(t.hashes) th
		 WHERE q.name = ANY ($1)`, queues).Scan(&distinct, &doubled)
	return distinct, doubled, err
}

func (t *Queengate) Close() error {
	for _, nc := range t.conns {
		nc.Close()
	}
	if t.pool != nil {
		t.pool.Close()
	}
	return nil
}

// ScrapeMetrics reads a gateway's /metrics (addr: its admin HTTP
// address), a Prometheus text exposition, into name{labels} -> value.
func ScrapeMetrics(ctx context.Context, addr string) (map[string]float64, error) {
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
