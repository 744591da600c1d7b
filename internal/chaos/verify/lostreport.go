package verify

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// The gateways' word on what a failover lost. On a new store epoch each
// gateway asks the new primary which of the acknowledged messages it
// journaled the new primary lacks, counts them
// (queengate_failover_lost_messages_total) and logs their messageIds
// (ingest/failover.go). Under asynchronous replication the verifier
// holds the gateways to it: an answer naming an offset a failover cut,
// whose message is not there now, must have been reported, or the
// client was told an offset that holds another message (or nothing)
// without anyone saying so.

// Log messages of ingest's report (prefixes: the rest may be reworded).
// Should they change, no report is found and the check fails loudly.
const (
	lostLogMessage   = "acknowledged messages PostgreSQL lacks after it changed"
	uncheckedMessage = "could not check which acknowledged messages PostgreSQL lacks"
)

// ReportedLost is what the gateways reported lost to failovers.
type ReportedLost struct {
	// IDs are the messageIds the reports named; Count the messages they
	// reported. A report names its first 1000 only: Unnamed is Count
	// less the ids named.
	IDs     map[string]bool
	Count   int64
	Unnamed int64
	// Unchecked are the reports a gateway could not make (it could not
	// ask the new primary within a minute).
	Unchecked int
	// Journal is how many acknowledged messages each gateway keeps to
	// check (ingest.Config.Journal): older ones go unreported.
	Journal int
}

// ReadReportedLost reads the reports in gateway logs (zerolog JSON, one
// object a line; other lines are skipped). journal is the gateways'
// journal bound.
func ReadReportedLost(journal int, logs ...io.Reader) (*ReportedLost, error) {
	r := &ReportedLost{IDs: map[string]bool{}, Journal: journal}
	for _, l := range logs {
		sc := bufio.NewScanner(l)
		sc.Buffer(make([]byte, 0, 1<<16), 1<<24) // a report names up to 1000 ids
		for sc.Scan() {
			var line struct {
				Message string   `json:"message"`
				Lost    int64    `json:"lost"`
				IDs     []string `json:"message_ids"`
			}
			if json.Unmarshal(sc.Bytes(), &line) != nil {
				continue
			}
			switch {
			case strings.HasPrefix(line.Message, lostLogMessage):
				r.Count += line.Lost
				r.Unnamed += line.Lost - int64(len(line.IDs))
				for _, id := range line.IDs {
					r.IDs[id] = true
				}
			case strings.HasPrefix(line.Message, uncheckedMessage):
				r.Unchecked++
			}
		}
		if err := sc.Err(); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// reportCheck judges the answers a failover cut against the reports,
// once every partition was read: the journal bound needs every answer's
// arrival.
type reportCheck struct {
	reported *ReportedLost
	arrivals []int64 // every answer's, in Unix ns
	cutIDs   map[string]bool
	missing  []missingReport
}

// missingReport is a cut answer no report named, and when the failover
// that cut it promoted.
type missingReport struct {
	answer   Answer
	promoted time.Time
}

func newReportCheck(r *ReportedLost) *reportCheck {
	if r == nil {
		return nil
	}
	return &reportCheck{reported: r, cutIDs: map[string]bool{}}
}

// saw notes one answer's arrival.
func (c *reportCheck) saw(a Answer) {
	if c != nil {
		c.arrivals = append(c.arrivals, unixNano(a.Arrived))
	}
}

// cut notes an answer naming an offset the failover promoted at cut,
// whose message is not there now.
func (c *reportCheck) cut(a Answer, promoted time.Time) {
	if c == nil {
		return
	}
	if c.cutIDs[a.MessageID] {
		return // a retry's answer naming the same message
	}
	c.cutIDs[a.MessageID] = true
	if !c.reported.IDs[a.MessageID] {
		c.missing = append(c.missing, missingReport{a, promoted})
	}
}

// finish counts the cut answers no gateway reported. One is excused when
// at least a journal's worth of answers came after it before the
// promotion: every gateway's journal may have dropped it (a gateway
// journals only its own answers, so this excuses more than it must,
// never less; a run with failovers closer than that is judged in full).
// Reports that named only their first 1000 ids excuse as many.
func (c *reportCheck) finish(f *Findings, found *FailoverFindings) {
	if c == nil {
		return
	}
	// Each unreported loss is an example, past the usual twenty: each is
	// a bug to look into, with its ids and times.
	example := func(format string, args ...any) {
		if len(f.Examples) < 120 {
			f.Examples = append(f.Examples, fmt.Sprintf(format, args...))
		}
	}
	found.Reported, found.ReportedIDs, found.Unchecked = c.reported.Count, int64(len(c.reported.IDs)), c.reported.Unchecked
	found.LostIDs = int64(len(c.cutIDs))
	slices.Sort(c.arrivals)
	var unreported int64
	for _, m := range c.missing {
		from, _ := slices.BinarySearch(c.arrivals, unixNano(m.answer.Arrived)+1)
		to, _ := slices.BinarySearch(c.arrivals, unixNano(m.promoted)+1)
		if to-from >= c.reported.Journal {
			found.BeyondJournal++
			continue
		}
		unreported++
		example("%s/%s answered %s at %d (%s, answer came %s), cut by the failover promoted %s, now not there: no gateway reported it lost",
			m.answer.Partition, m.answer.ID, m.answer.Status, m.answer.Offset, m.answer.MessageID, stamp(m.answer.Arrived), stamp(m.promoted))
	}
	excused := min(unreported, max(c.reported.Unnamed, 0))
	found.InUnnamedReports = excused
	f.Unreported += unreported - excused
}

// unixNano is t in Unix ns; an unknown time (zero) is the earliest.
func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return math.MinInt64 + 1 // +1: finish searches past it
	}
	return t.UnixNano()
}
