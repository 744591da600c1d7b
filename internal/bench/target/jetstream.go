package target

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/queengate/queengate/internal/bench"
	"github.com/queengate/queengate/internal/bench/proc"
	"github.com/queengate/queengate/model"
)

const (
	// JetStreamStream is the stream every run writes to.
	JetStreamStream = "BENCH"
	// producersPerConn is how many producers share one NATS connection. One
	// connection for all would serialize async publishes on its single
	// writer; one each would measure connection handling instead.
	producersPerConn = 8
	// jetstreamAckTimeout turns a lost ack into a failed message instead of
	// a producer waiting forever.
	jetstreamAckTimeout = 30 * time.Second
)

// JetStream is NATS JetStream's own deduplication: a file-backed
// stream whose duplicate window drops a message whose Nats-Msg-Id was seen
// within the window. The server runs as a child process (see
// proc.PlayRole) so that its CPU and memory can be measured.
type JetStream struct {
	// Server is the JetStream server process; AdminJS manages the stream, and
	// reads and consumes it in the side-by-side scenarios.
	Server *proc.NATSServer
	// admin manages the stream; pubs are the producers' connections, made
	// by Setup once the number of producers is known.
	admin   *nats.Conn
	AdminJS jetstream.JetStream
	conns   []*nats.Conn
	pubs    []jetstream.JetStream
	headers [][2]string // every message's (Workload.Headers)
	// cpuAtSetup is the server's CPU seconds when Setup finished, so that
	// Figures reports the run's share only.
	cpuAtSetup float64
}

var _ bench.Target = (*JetStream)(nil)

// NewJetStream starts a JetStream server process storing in dir and
// connects to it. The stream is created by Setup.
func NewJetStream(ctx context.Context, dir string) (*JetStream, error) {
	srv, err := proc.StartNATSServer(ctx, dir, nil)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	nc, err := nats.Connect(srv.URL, nats.Name("queenbench-admin"))
	if err != nil {
		_ = srv.Stop()
		return nil, fmt.Errorf("jetstream: connect: %w", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		_ = srv.Stop()
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	return &JetStream{Server: srv, admin: nc, AdminJS: js}, nil
}

// Name implements Target.
func (t *JetStream) Name() string { return "jetstream" }

// Setup implements Target: it recreates the stream (RecreateStream) and
// connects the producers.
func (t *JetStream) Setup(ctx context.Context, w bench.Workload) error {
	if err := t.RecreateStream(ctx, JetStreamStream, "bench.>", w); err != nil {
		return err
	}

	t.closeProducerConns()
	t.headers = bench.MessageHeaders(w.Headers)
	n := max((w.Producers+producersPerConn-1)/producersPerConn, 1)
	for i := range n {
		nc, err := nats.Connect(t.Server.URL, nats.Name(fmt.Sprintf("queenbench-producers-%d", i)))
		if err != nil {
			return fmt.Errorf("jetstream: connect producers: %w", err)
		}
		t.conns = append(t.conns, nc)
		js, err := asyncPublisher(nc, w)
		if err != nil {
			return fmt.Errorf("jetstream: %w", err)
		}
		t.pubs = append(t.pubs, js)
	}

	cpu, err := proc.CPUSeconds(t.Server.PID())
	if err != nil {
		return fmt.Errorf("jetstream: server cpu: %w", err)
	}
	t.cpuAtSetup = cpu
	return nil
}

// RecreateStream deletes the named stream if it exists and creates it
// afresh, file-backed, taking subjects, with the workload's window as its
// duplicate window. JetStream cannot turn deduplication off, so a window
// of 0 becomes the shortest it takes, 1 second.
func (t *JetStream) RecreateStream(ctx context.Context, name, subjects string, w bench.Workload) error {
	if err := t.AdminJS.DeleteStream(ctx, name); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("jetstream: delete stream: %w", err)
	}
	_, err := t.AdminJS.CreateStream(ctx, jetstream.StreamConfig{
		Name:       name,
		Subjects:   []string{subjects},
		Storage:    jetstream.FileStorage,
		Duplicates: time.Duration(max(w.WindowSeconds, 1)) * time.Second,
	})
	if err != nil {
		return fmt.Errorf("jetstream: create stream: %w", err)
	}
	return nil
}

// Send implements Target: it publishes the batch asynchronously on the
// producer's connection, then waits for every ack. The Nats-Msg-Id carries
// queue and partition because JetStream deduplicates per stream, and
// queengate per partition.
func (t *JetStream) Send(ctx context.Context, producer int, b *bench.Batch) ([]model.Status, error) {
	statuses, err := publishAsync(ctx, t.pubs[producer%len(t.pubs)], "bench."+b.Queue+"."+b.Partition,
		b.Queue+"/"+b.Partition+"/", b, t.headers)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	return statuses, nil
}

// asyncPublisher is a JetStream client on nc for a workload's producers.
// Each producer waits for its batch's acks before sending the next, so a
// connection never has more than its producers' batches in flight;
// beyond the limit, an async publish would stall and then fail.
func asyncPublisher(nc *nats.Conn, w bench.Workload) (jetstream.JetStream, error) {
	maxPending := max(4000, 2*producersPerConn*w.PerRequest)
	return jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(maxPending), jetstream.WithPublishAsyncTimeout(jetstreamAckTimeout))
}

// publishAsync publishes the batch's messages one by one with the
// JetStream client's PublishMsgAsync to subject (each with headers and
// the Nats-Msg-Id idPrefix+id), then waits for every PubAck: what the
// jetstream target does into JetStream, and the queengate target into
// its publish subject.
func publishAsync(ctx context.Context, js jetstream.JetStream, subject, idPrefix string, b *bench.Batch, headers [][2]string) ([]model.Status, error) {
	statuses := make([]model.Status, len(b.IDs))
	futures := make([]jetstream.PubAckFuture, len(b.IDs))
	for i, id := range b.IDs {
		m := nats.NewMsg(subject)
		m.Data = b.Data[i]
		for _, h := range headers {
			m.Header.Set(h[0], h[1])
		}
		m.Header.Set(jetstream.MsgIDHeader, idPrefix+id)
		f, err := js.PublishMsgAsync(m)
		if err != nil {
			statuses[i] = model.StatusFailed
			continue
		}
		futures[i] = f
	}
	for i, f := range futures {
		if f == nil {
			continue
		}
		select {
		case ack := <-f.Ok():
			statuses[i] = model.StatusQueued
			if ack.Duplicate {
				statuses[i] = model.StatusDuplicate
			}
		case <-f.Err():
			statuses[i] = model.StatusFailed
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for acks: %w", ctx.Err())
		}
	}
	return statuses, nil
}

// Figures implements Target with the server process's CPU since Setup and
// its peak resident set (over the process's life, which begins with this
// target).
func (t *JetStream) Figures(context.Context) (bench.Figures, error) {
	f := bench.UnknownFigures()
	cpu, err := proc.CPUSeconds(t.Server.PID())
	if err != nil {
		return f, fmt.Errorf("jetstream: server cpu: %w", err)
	}
	f.ServerCPUSeconds = cpu - t.cpuAtSetup
	if f.PeakRSSBytes, err = proc.PeakRSS(t.Server.PID()); err != nil {
		return f, fmt.Errorf("jetstream: server rss: %w", err)
	}
	return f, nil
}

// Close implements Target: it closes the connections and stops the server
// process. The store directory is left to its owner.
func (t *JetStream) Close() error {
	t.closeProducerConns()
	t.admin.Close()
	return t.Server.Stop()
}

// closeProducerConns closes the producers' connections, if any.
func (t *JetStream) closeProducerConns() {
	for _, nc := range t.conns {
		nc.Close()
	}
	t.conns, t.pubs = nil, nil
}
