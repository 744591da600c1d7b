package routing

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/internal/peers"
)

// The NATS push mapping is checked by a probe, not assumed: the gateway
// publishes pushes for the probe queue (which no gateway stores) and
// watches where the server delivers them.
//
//   - present: they arrive on the shard subjects partition() gives with
//     this gateway's shard count; partitions keep their gateway.
//   - absent: they arrive unmapped on <prefix>.push.…; the gateway still
//     serves (every push is taken by some gateway of the queue group, and
//     exactly), but without affinity. It warns at start and on every
//     probe, and queengate_routing_mapping{state="absent"} is 1. Refusing
//     to start would turn a missing line of NATS configuration into an
//     outage of a system that is correct without it.
//   - mismatched: they arrive on other shards (a mapping onto another
//     shard count): shards this fleet does not subscribe would get no
//     responders, so the gateway refuses to start.
//   - unknown: nothing arrived (no permission to publish the probe, say).
//
// Only the server this gateway is connected to is probed; in a cluster,
// every server needs the mapping (README).

// mappingState is what a probe found.
type mappingState string

const (
	mappingPresent mappingState = "present"
	mappingAbsent  mappingState = "absent"
	mappingUnknown mappingState = "unknown"
)

// probeCount is how many pushes one probe sends: a mapping onto another
// shard count that agrees with ours on all of them by chance is then
// unlikely (for 128 shards against 64, one in 65,536).
const probeCount = 16

// probeMapping reports where NATS delivers pushes; err names a mismatch.
func probeMapping(nc *nats.Conn, prefix string, shards int, timeout time.Duration) (mappingState, error) {
	nonce := nuid.Next()
	arrived := make(chan string, 2*probeCount)
	collect := func(m *nats.Msg) {
		select {
		case arrived <- m.Subject:
		default:
		}
	}
	s := queengate.Subjects{Prefix: prefix}
	for _, subject := range []string{s.Wildcard(peers.Probe), s.Verb(peers.Shard) + ".*." + peers.ProbeQueue + ".*"} {
		sub, err := nc.Subscribe(subject, collect)
		if err != nil {
			return mappingUnknown, fmt.Errorf("gateway: probe the push mapping: %w", err)
		}
		defer func() { _ = sub.Unsubscribe() }()
	}
	// The subscriptions must be live before the probes go.
	if err := nc.FlushTimeout(timeout); err != nil {
		return mappingUnknown, nil
	}
	for i := range probeCount {
		if err := nc.Publish(s.Verb(peers.Probe)+"."+nonce+strconv.Itoa(i), nil); err != nil {
			return mappingUnknown, nil
		}
	}
	deadline := time.After(timeout)
	state := mappingUnknown
	for range probeCount {
		select {
		case subject := <-arrived:
			s, err := judgeProbe(prefix, shards, subject)
			if err != nil {
				return s, err
			}
			if state == mappingUnknown || s == mappingAbsent {
				state = s
			}
		case <-deadline:
			return state, nil
		}
	}
	return state, nil
}

// judgeProbe reads where one probe push arrived.
func judgeProbe(prefix string, shards int, subject string) (mappingState, error) {
	shard := queengate.Subjects{Prefix: prefix}.Verb(peers.Shard)
	rest, ok := strings.CutPrefix(subject, shard+".")
	if !ok {
		return mappingAbsent, nil
	}
	tokens := strings.Split(rest, ".")
	got, err := strconv.Atoi(tokens[0])
	if err != nil || len(tokens) != 3 {
		return mappingUnknown, fmt.Errorf("gateway: NATS maps pushes onto %q, not %s.<n>.<queue>.<partition>", subject, shard)
	}
	if want := ShardOf(shards, tokens[1], tokens[2]); got != want {
		return mappingUnknown, fmt.Errorf("gateway: NATS maps pushes onto shards of another count (a probe landed on shard %d, not %d of %d): "+
			"the NATS mapping and every gateway's routing shards (QUEEN_ROUTING_SHARDS) must agree", got, want, shards)
	}
	return mappingPresent, nil
}

// checkMapping probes the mapping, records it, and says what it means.
func (r *Router) checkMapping() error {
	state, err := probeMapping(r.nc, r.prefix, r.cfg.Shards, r.cfg.ProbeTimeout)
	for _, s := range []mappingState{mappingPresent, mappingAbsent, mappingUnknown} {
		v := 0.0
		if s == state && err == nil {
			v = 1
		}
		r.m.mapping.WithLabelValues(string(s)).Set(v)
	}
	if err != nil {
		return err
	}
	r.mu.Lock()
	changed := state != r.mapping
	r.mapping = state
	r.mu.Unlock()
	switch {
	case state == mappingAbsent:
		s := queengate.Subjects{Prefix: r.prefix}
		r.log.Warn().Str("want", s.Verb(queengate.APIPush)+".> mapped onto "+s.Verb(peers.Shard)+".<n>.…").
			Msg("NATS does not map pushes onto routing shards: every gateway takes any push, so caches meet interleaves and fusion buffers split; add the mappings block (README, Several gateways)")
	case state == mappingUnknown && changed:
		r.log.Warn().Msg("could not tell whether NATS maps pushes onto routing shards: the probe pushes arrived nowhere (permissions?)")
	case state == mappingPresent && changed:
		r.log.Info().Int("shards", r.cfg.Shards).Msg("NATS maps pushes onto routing shards")
	}
	return nil
}
