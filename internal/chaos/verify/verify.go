package verify

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// Sent is one message a producer sent, under its first data: Data and
// Meta as the log stores them (Meta, its headers and data encoding, the
// gateway's JSON; empty for none).
type Sent struct {
	Partition, ID string
	Data, Meta    string
}

// Answer is one queued or duplicate answer a producer got.
type Answer struct {
	Partition, ID string
	Status        string // queued or duplicate
	Offset        int64
	MessageID     string
	Arrived       time.Time // the answer came (zero: unknown; only failovers need it)
}

// Findings is the verifier's verdict. Every count but the first four is a
// violation.
type Findings struct {
	Sent     int64 `json:"sent"`     // distinct (partition, transactionId) sent
	Answered int64 `json:"answered"` // of those, answered queued or duplicate
	Stored   int64 `json:"stored"`   // distinct ones stored
	Rows     int64 `json:"rows"`     // messages in the log

	Lost              int64 `json:"lost"`              // answered as stored, not in the log
	Doubled           int64 `json:"doubled"`           // stored more than once
	WrongOffset       int64 `json:"wrongOffset"`       // a queued answer not naming where it is
	DuplicateNotFirst int64 `json:"duplicateNotFirst"` // a duplicate answer not naming the first copy
	DataMismatch      int64 `json:"dataMismatch"`      // stored data, headers or data encoding unlike what was sent
	Phantom           int64 `json:"phantom"`           // stored, never sent
	Holes             int64 `json:"holes"`             // partitions whose offsets are not 0..n-1
	// Vanished, with failovers only: an answer naming an offset no
	// failover cut, for a message the log does not hold (a duplicate
	// vouched for by a stale cache, say). Without failovers it is Lost.
	Vanished int64 `json:"vanished"`
	// Unreported, with failovers and the gateways' reports: answers
	// naming an offset a failover cut, whose message is not there now,
	// that no gateway reported lost (see lostreport.go).
	Unreported int64 `json:"unreported"`

	// Failover is the losses failovers explain (VerifyFailovers only).
	Failover *FailoverFindings `json:"failover,omitempty"`

	// Consume is the consumers' checks, when consumers ran.
	Consume *ConsumeFindings `json:"consume,omitempty"`

	Examples []string `json:"examples,omitempty"`
}

// Violations is the number of violations found.
func (f Findings) Violations() int64 {
	n := f.Lost + f.Doubled + f.WrongOffset + f.DuplicateNotFirst + f.DataMismatch + f.Phantom + f.Holes + f.Vanished + f.Unreported
	if f.Consume != nil {
		n += f.Consume.Violations()
	}
	return n
}

type key struct{ partition, id string }

// row is one stored message.
type row struct {
	partitionID, offset int64
	data, meta          string // meta empty for none
}

// Expected is what producers sent and were answered, given one
// partition at a time so that a long run's records need not all be
// expanded at once.
type Expected interface {
	Partitions() []string
	Partition(i int) ([]Sent, []Answer)
}

// Recorded is an Expected held in full.
type Recorded struct {
	Sent    []Sent
	Answers []Answer
}

func (r Recorded) Partitions() []string {
	var names []string
	for _, s := range r.Sent {
		if !slices.Contains(names, s.Partition) {
			names = append(names, s.Partition)
		}
	}
	for _, a := range r.Answers {
		if !slices.Contains(names, a.Partition) {
			names = append(names, a.Partition)
		}
	}
	return names
}

func (r Recorded) Partition(i int) (sent []Sent, answers []Answer) {
	name := r.Partitions()[i]
	for _, s := range r.Sent {
		if s.Partition == name {
			sent = append(sent, s)
		}
	}
	for _, a := range r.Answers {
		if a.Partition == name {
			answers = append(answers, a)
		}
	}
	return sent, answers
}

// Verify checks queue's log in the database at pgURL, partition by
// partition; messages in partitions nobody sent to are phantoms. With
// con (what consumers saw; nil when none ran) it checks the consumer
// groups too: see verify_consume.go.
func Verify(ctx context.Context, pgURL, queue string, exp Expected, con *Consumed) (Findings, error) {
	return verify(ctx, pgURL, queue, exp, con, nil, nil)
}

func verify(ctx context.Context, pgURL, queue string, exp Expected, con *Consumed, failovers []Failover, reported *ReportedLost) (Findings, error) {
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		return Findings{}, err
	}
	defer conn.Close(ctx)
	var f Findings
	example := func(format string, args ...any) {
		if len(f.Examples) < 20 {
			f.Examples = append(f.Examples, fmt.Sprintf(format, args...))
		}
	}
	loss := lossModel{failovers: failovers}
	if loss.on() {
		f.Failover = &FailoverFindings{Failovers: len(failovers)}
		loss.found = f.Failover
		loss.reports = newReportCheck(reported)
	}
	ix, err := startConsumeCheck(ctx, conn, queue, con, loss, &f)
	if err != nil {
		return Findings{}, err
	}
	names := exp.Partitions()
	for i, name := range names {
		sent, answers := exp.Partition(i)
		stored, offsets, err := readPartition(ctx, conn, queue, name)
		if err != nil {
			return Findings{}, err
		}
		checkStored(&f, stored, sent, example)
		plog := newPartitionLog(name, stored, answers)
		checkAnswers(&f, loss, plog, stored, answers, example)
		if ix != nil {
			dead, _, err := readPartition(ctx, conn, deadLetterQueue(queue), name)
			if err != nil {
				return Findings{}, err
			}
			ix.checkConsumed(f.Consume, plog, dead, example)
		}
		f.Rows += int64(len(offsets))
		slices.Sort(offsets)
		for k, o := range offsets {
			if o != int64(k) {
				f.Holes++
				example("partition %s: offsets are not 0..%d (offset %d at rank %d)", name, len(offsets)-1, o, k)
				break
			}
		}
	}
	if ix != nil {
		ix.checkMoves(f.Consume, example)
	}
	loss.reports.finish(&f, f.Failover)
	var elsewhere int64
	err = conn.QueryRow(ctx, `
		SELECT coalesce(sum(s.end_offset - s.base_offset + 1), 0)
		  FROM queen.queues q
		  JOIN queen.log_partitions p ON p.queue_id = q.id
		  JOIN queen.log_segments s ON s.partition_id = p.id
		 WHERE q.name = $1 AND p.name <> ALL ($2)`, queue, names).Scan(&elsewhere)
	if elsewhere > 0 {
		f.Phantom += elsewhere
		f.Rows += elsewhere
		example("%d messages stored in partitions nobody sent to", elsewhere)
	}
	return f, err
}

// checkStored compares the log with what was sent: copies, data, phantoms.
func checkStored(f *Findings, stored map[key][]row, sent []Sent, example func(string, ...any)) {
	data := make(map[key]Sent, len(sent))
	for _, s := range sent {
		data[key{s.Partition, s.ID}] = s
	}
	f.Sent += int64(len(data))
	for k, rows := range stored {
		f.Stored++
		if len(rows) > 1 {
			f.Doubled += int64(len(rows) - 1)
			example("%s/%s stored %d times", k.partition, k.id, len(rows))
		}
		want, ok := data[k]
		if !ok {
			f.Phantom++
			example("%s/%s stored, never sent", k.partition, k.id)
			continue
		}
		if !sameJSON(rows[0].data, want.Data) || rows[0].meta != want.Meta {
			f.DataMismatch++
			example("%s/%s stored %s %s, sent %s %s", k.partition, k.id, rows[0].data, rows[0].meta, want.Data, want.Meta)
		}
	}
}

// checkAnswers compares every answer with where its message is. With
// failovers, an answer naming an offset a later failover cut is a loss
// (counted), and one naming an offset no failover cut must hold.
func checkAnswers(f *Findings, loss lossModel, p partitionLog, stored map[key][]row, answers []Answer, example func(string, ...any)) {
	answered := map[key]bool{}
	for _, a := range answers {
		k := key{a.Partition, a.ID}
		answered[k] = true
		loss.reports.saw(a)
		rows := stored[k]
		if len(rows) > 0 && a.Offset == rows[0].offset && a.MessageID == MessageID(rows[0].partitionID, rows[0].offset) {
			continue
		}
		if fo, ok := loss.cutBy(a.Partition, a.Offset, a.Arrived); loss.on() && ok {
			loss.found.LostAnswers++
			if holder, ok := p.byOffset[a.Offset]; ok && holder != a.ID {
				loss.found.Reused++
			}
			loss.reports.cut(a, fo.Promoted)
			continue
		}
		if len(rows) == 0 {
			if loss.on() {
				f.Vanished++
				example("%s/%s answered %s at %d (answer came %s), no failover since cut that offset, not in the log",
					k.partition, k.id, a.Status, a.Offset, stamp(a.Arrived))
			}
			continue // without failovers: counted once below, as lost
		}
		first := rows[0]
		if a.Status == "queued" {
			f.WrongOffset++
		} else {
			f.DuplicateNotFirst++
		}
		example("%s/%s answered %s at %d (%s), first stored at %d", k.partition, k.id, a.Status, a.Offset, a.MessageID, first.offset)
	}
	f.Answered += int64(len(answered))
	for k := range answered {
		if len(stored[k]) > 0 {
			continue
		}
		if loss.on() {
			loss.found.Lost++
			continue
		}
		f.Lost++
		example("%s/%s answered stored, not in the log", k.partition, k.id)
	}
}

// readPartition reads every message of one partition of queue: by
// (partition, id), its copies in offset order, and every offset.
func readPartition(ctx context.Context, conn *pgx.Conn, queue, partition string) (map[key][]row, []int64, error) {
	rows, err := conn.Query(ctx, `
		SELECT p.id, s.base_offset + m.i - 1, m.id, m.d::text, coalesce(m.m::text, '')
		  FROM queen.queues q
		  JOIN queen.log_partitions p ON p.queue_id = q.id
		  JOIN queen.log_segments s ON s.partition_id = p.id
		 CROSS JOIN LATERAL unnest(s.txn_ids, s.data, s.meta) WITH ORDINALITY AS m(id, d, m, i)
		 WHERE q.name = $1 AND p.name = $2
		 ORDER BY 2`, queue, partition)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	stored := map[key][]row{}
	var offsets []int64
	for rows.Next() {
		var (
			id string
			r  row
		)
		if err := rows.Scan(&r.partitionID, &r.offset, &id, &r.data, &r.meta); err != nil {
			return nil, nil, err
		}
		k := key{partition, id}
		stored[k] = append(stored[k], r)
		offsets = append(offsets, r.offset)
	}
	return stored, offsets, rows.Err()
}

// messageID is the protocol's message id: the partition id in the first
// 16 hex digits and the offset in the last 16, shaped like a UUID.
func MessageID(partitionID, offset int64) string {
	h := fmt.Sprintf("%016x%016x", partitionID, offset)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// sameJSON compares two JSON texts by value (the log keeps data as sent,
// but a verifier should not depend on it).
func sameJSON(a, b string) bool {
	if a == b {
		return true // the log keeps data as sent: the common case, and cheap
	}
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return a == b
	}
	return reflect.DeepEqual(x, y)
}
