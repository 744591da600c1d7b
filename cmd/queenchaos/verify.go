package main

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"

	"github.com/jackc/pgx/v5"
)

// The verifier reads the log back with its own SQL and checks it against
// what the producers sent and were answered. It shares no code with the
// gateway on purpose (pgx only): a bug in the gateway's reading of its
// own log must not hide a bug in its writing.

// Sent is one message a producer sent, under its first data.
type Sent struct {
	Partition, ID string
	Data          string
}

// Answer is one queued or duplicate answer a producer got.
type Answer struct {
	Partition, ID string
	Status        string // queued or duplicate
	Offset        int64
	MessageID     string
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
	DataMismatch      int64 `json:"dataMismatch"`      // stored data unlike what was sent
	Phantom           int64 `json:"phantom"`           // stored, never sent
	Holes             int64 `json:"holes"`             // partitions whose offsets are not 0..n-1

	Examples []string `json:"examples,omitempty"`
}

// Violations is the number of violations found.
func (f Findings) Violations() int64 {
	return f.Lost + f.Doubled + f.WrongOffset + f.DuplicateNotFirst + f.DataMismatch + f.Phantom + f.Holes
}

type key struct{ partition, id string }

// row is one stored message.
type row struct {
	partitionID, offset int64
	data                string
}

// Verify checks queue's log in the database at pgURL.
func Verify(ctx context.Context, pgURL, queue string, sent []Sent, answers []Answer) (Findings, error) {
	stored, offsets, err := readLog(ctx, pgURL, queue)
	if err != nil {
		return Findings{}, err
	}
	var f Findings
	example := func(format string, args ...any) {
		if len(f.Examples) < 20 {
			f.Examples = append(f.Examples, fmt.Sprintf(format, args...))
		}
	}
	checkStored(&f, stored, sent, example)
	checkAnswers(&f, stored, answers, example)
	for partition, offs := range offsets {
		f.Rows += int64(len(offs))
		slices.Sort(offs)
		for i, o := range offs {
			if o != int64(i) {
				f.Holes++
				example("partition %s: offsets are not 0..%d (offset %d at rank %d)", partition, len(offs)-1, o, i)
				break
			}
		}
	}
	return f, nil
}

// checkStored compares the log with what was sent: copies, data, phantoms.
func checkStored(f *Findings, stored map[key][]row, sent []Sent, example func(string, ...any)) {
	data := make(map[key]string, len(sent))
	for _, s := range sent {
		data[key{s.Partition, s.ID}] = s.Data
	}
	f.Sent = int64(len(data))
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
		if !sameJSON(rows[0].data, want) {
			f.DataMismatch++
			example("%s/%s stored %s, sent %s", k.partition, k.id, rows[0].data, want)
		}
	}
}

// checkAnswers compares every answer with where its message is.
func checkAnswers(f *Findings, stored map[key][]row, answers []Answer, example func(string, ...any)) {
	answered := map[key]bool{}
	for _, a := range answers {
		k := key{a.Partition, a.ID}
		answered[k] = true
		rows := stored[k]
		if len(rows) == 0 {
			continue // counted once below
		}
		first := rows[0]
		if a.Offset == first.offset && a.MessageID == messageID(first.partitionID, first.offset) {
			continue
		}
		if a.Status == "queued" {
			f.WrongOffset++
		} else {
			f.DuplicateNotFirst++
		}
		example("%s/%s answered %s at %d (%s), first stored at %d", k.partition, k.id, a.Status, a.Offset, a.MessageID, first.offset)
	}
	f.Answered = int64(len(answered))
	for k := range answered {
		if len(stored[k]) == 0 {
			f.Lost++
			example("%s/%s answered stored, not in the log", k.partition, k.id)
		}
	}
}

// readLog reads every message of queue: by (partition, id), its copies
// in offset order; by partition, every offset.
func readLog(ctx context.Context, pgURL, queue string) (map[key][]row, map[string][]int64, error) {
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		return nil, nil, err
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `
		SELECT p.name, p.id, s.base_offset + m.i - 1, m.id, m.d::text
		  FROM queen.queues q
		  JOIN queen.log_partitions p ON p.queue_id = q.id
		  JOIN queen.log_segments s ON s.partition_id = p.id
		 CROSS JOIN LATERAL unnest(s.txn_ids, s.data) WITH ORDINALITY AS m(id, d, i)
		 WHERE q.name = $1
		 ORDER BY p.id, 3`, queue)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	stored := map[key][]row{}
	offsets := map[string][]int64{}
	for rows.Next() {
		var (
			partition, id string
			r             row
		)
		if err := rows.Scan(&partition, &r.partitionID, &r.offset, &id, &r.data); err != nil {
			return nil, nil, err
		}
		k := key{partition, id}
		stored[k] = append(stored[k], r)
		offsets[partition] = append(offsets[partition], r.offset)
	}
	return stored, offsets, rows.Err()
}

// messageID is the protocol's message id: the partition id in the first
// 16 hex digits and the offset in the last 16, shaped like a UUID.
func messageID(partitionID, offset int64) string {
	h := fmt.Sprintf("%016x%016x", partitionID, offset)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// sameJSON compares two JSON texts by value (the log keeps data as sent,
// but a verifier should not depend on it).
func sameJSON(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return a == b
	}
	return reflect.DeepEqual(x, y)
}
