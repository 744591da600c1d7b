package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/queengate/queengate/internal/chaos/verify"
	"github.com/queengate/queengate/internal/chaos/world"
)

// verifierFailovers are the failovers as the verifier reads them, under
// asynchronous replication; nil with synchronous replication, where a
// failover must lose nothing and the verifier is the strict one.
func verifierFailovers(w *world.World) []verify.Failover {
	if w.Replication().Sync {
		return nil
	}
	failovers := w.Failovers()
	out := make([]verify.Failover, len(failovers))
	for i, f := range failovers {
		out[i] = verify.Failover{Stopping: f.Stopping, Stopped: f.Stopped, Promoted: f.Promoted, Kept: f.Kept}
	}
	return out
}

// gatewayJournal is the gateways' journal of acknowledged messages
// (ingest.Config.Journal's default: the suite leaves it).
const gatewayJournal = 1 << 18

// reportedLost reads what the gateways reported lost to failovers from
// their logs; nil with synchronous replication, where the strict
// verifier finds any loss.
func reportedLost(w *world.World) (*verify.ReportedLost, error) {
	if w.Replication().Sync || len(w.Failovers()) == 0 {
		return nil, nil
	}
	var logs []io.Reader
	for _, g := range w.Gateways() {
		f, err := os.Open(filepath.Join(w.Dir(), fmt.Sprintf("gateway-%d.log", g.Index()))) // world.Gateway's log
		if err != nil {
			return nil, err
		}
		defer f.Close()
		logs = append(logs, f)
	}
	return verify.ReadReportedLost(gatewayJournal, logs...)
}

// failoverFigures are what producers saw across one failover.
type failoverFigures struct {
	world.Failover
	// Promotion is from the old primary's stop to the new one's first
	// writes: what the failover manager took.
	Promotion time.Duration `json:"promotionNs"`
	// LongestFleetGap is the longest time without a successful answer to
	// any producer from the stop until afterFault past the re-attachment;
	// LongestProducerGap the longest one producer went without.
	LongestFleetGap    time.Duration `json:"longestFleetGapNs"`
	LongestProducerGap time.Duration `json:"longestProducerGapNs"`
}

func figuresByFailover(failovers []world.Failover, events []event, producers int) []failoverFigures {
	out := make([]failoverFigures, len(failovers))
	for i, f := range failovers {
		to := f.Attached
		if to.IsZero() {
			to = f.Promoted
		}
		fleet, perProducer := gaps(events, producers, f.Stopping, to.Add(afterFault))
		out[i] = failoverFigures{Failover: f, Promotion: f.Promoted.Sub(f.Stopping), LongestFleetGap: fleet}
		for _, g := range perProducer {
			out[i].LongestProducerGap = max(out[i].LongestProducerGap, g)
		}
	}
	return out
}

// failoverCounters are the gateways' counters the failover figures
// report: the cache's full hydrations and rebuilds (a gateway that sees a
// changed primary rehydrates), and the messages a gateway reports lost
// to a failover, once the gateway has that counter.
var failoverCounters = []string{"queengate_dedup_hydrations_total", "queengate_dedup_rebuilds_total", lostCounter}

const lostCounter = "queengate_failover_lost_messages_total"

// writeFailovers adds the failovers' figures to the report: each
// failover's promotion and longest time without answers, what the
// failovers lost (asynchronous replication), the gateways' counters.
func writeFailovers(b *strings.Builder, out *outcome) {
	if len(out.Failovers) > 0 {
		b.WriteString("\n| failover | how | promotion (stop → writes) | longest gap, all producers | longest gap, one producer | re-attached | re-attach time |\n")
		b.WriteString("|---:|---|---:|---:|---:|---|---:|\n")
		for i, f := range out.Failovers {
			how, attach := "kill -9", "pg_rewind"
			if f.Clean {
				how = "fast shutdown"
			}
			if !f.Rewound {
				attach = "base backup"
			}
			attachTime := "failed"
			if !f.Attached.IsZero() {
				attachTime = seconds(f.Attached.Sub(f.Promoted))
			}
			fmt.Fprintf(b, "| %d | %s | %s | %s | %s | %s | %s |\n", i+1, how, seconds(f.Promotion),
				seconds(f.LongestFleetGap), seconds(f.LongestProducerGap), attach, attachTime)
		}
	}
	if l := out.Verifier.Failover; l != nil {
		fmt.Fprintf(b, "\nLost to asynchronous replication over %d failovers (counted, not violations): %d ids answered as stored and absent from the log, "+
			"%d answers naming an offset a failover cut, %d of them an offset now holding another message; %d deliveries of a cut offset, %d acks, %d leases, %d dead-letter moves.\n",
			l.Failovers, l.Lost, l.LostAnswers, l.Reused, l.LostDeliveries, l.LostAcks, l.LostLeases, l.LostMoves)
		fmt.Fprintf(b, "\nReported by the gateways' logs: %d messages lost, %d distinct messageIds named; the verifier finds %d distinct messageIds answered at an offset a failover cut that does not hold them now: "+
			"%d no gateway reported (violations), %d older than the gateways' journal, %d possibly in reports naming only their first 1000; %d reports the gateways could not make.\n",
			l.Reported, l.ReportedIDs, l.LostIDs, out.Verifier.Unreported, l.BeyondJournal, l.InUnnamedReports, l.Unchecked)
	}
	if len(out.Counters) > 0 {
		reported := "not exposed by these gateways"
		if n, ok := out.Counters[lostCounter]; ok {
			reported = strconv.FormatFloat(n, 'f', 0, 64)
		}
		fmt.Fprintf(b, "\nGateways' counters at the end: %.0f cache hydrations, %.0f rebuilds; messages reported lost to a failover (%s): %s.\n",
			out.Counters["queengate_dedup_hydrations_total"], out.Counters["queengate_dedup_rebuilds_total"], lostCounter, reported)
	}
}
