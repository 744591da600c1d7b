package pgstore_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/model"
	"github.com/queengate/queengate/pgstore"
)

// pushData pushes one message of data with transactionId id.
func (b *testBundle) pushData(t *testing.T, id, data string) {
	t.Helper()
	fr := model.Frame{PartitionID: b.part.ID, Verified: -1, TxnIDs: []string{id}, Hashes: []model.Hash{model.HashTxnID(id)},
		Data: [][]byte{[]byte(data)}}
	if _, err := b.store.Push(context.Background(), []model.Frame{fr}); err != nil {
		t.Fatal(err)
	}
}

// deadLetterOf fails the one message of the test's queue at maxAttempts
// 1 with why, and returns its dead letter's data.
func (b *consumerBundle) deadLetterOf(t *testing.T, why string) []byte {
	t.Helper()
	b.setMaxAttempts(t, 1)
	r := b.pop(t, b.group, 1)
	if a := b.ack(t, r.LeaseID, model.Settlement{Offset: 0, Error: why}); a.DeadLettered != 1 {
		t.Fatalf("ack: %+v", a)
	}
	dl := b.deadLetters(t)
	if len(dl) != 1 {
		t.Fatalf("%d dead letters, want 1", len(dl))
	}
	return dl[0].Data
}

func decodeDeadLetter(t *testing.T, data []byte) model.DeadLetter {
	t.Helper()
	var d model.DeadLetter
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("dead letter %.300s: %v", data, err)
	}
	return d
}

// smallLimit is the data limit of setupSmallLimit's store.
const smallLimit = 8 << 10

// setupSmallLimit is setupConsumer of one message of data, transactionId
// x, on a store that holds data to smallLimit bytes.
func setupSmallLimit(t *testing.T, data string) *consumerBundle {
	t.Helper()
	b := setupConsumer(t, 0)
	b.store.SetMaxData(func() int64 { return smallLimit })
	b.pushData(t, "x", data)
	return b
}

// A store not told the limit holds dead letters to the push limit of
// NATS's default max payload.
func TestTheDefaultDataLimitIsTheDefaultMaxPayloads(t *testing.T) {
	if want := queengate.MaxDataBytes(1 << 20); pgstore.DefaultMaxData != want {
		t.Fatalf("default data limit %d, want %d", pgstore.DefaultMaxData, want)
	}
}

// A dead letter whose error would take it over the data limit carries
// the data whole and as much of the error as fits, cut on a character
// boundary and marked; < > & are not escaped.
func TestADeadLetterCutsTheErrorToFit(t *testing.T) {
	t.Parallel()
	data := `"` + strings.Repeat("d", smallLimit-2000) + `"`
	b := setupSmallLimit(t, data)
	why := "<&>" + strings.Repeat("é", 2000) // 4003 bytes
	dl := b.deadLetterOf(t, why)
	d := decodeDeadLetter(t, dl)
	cut, marked := strings.CutSuffix(d.Error, "…")
	if len(dl) > smallLimit || string(d.Data) != data || !marked || !strings.HasPrefix(why, cut) || !utf8.ValidString(cut) {
		t.Fatalf("dead letter of %d bytes (smallLimit %d), data kept %v, error %.40q…%q", len(dl), smallLimit, string(d.Data) == data, d.Error, d.Error[len(d.Error)-8:])
	}
	if len(dl)+len("é") <= smallLimit {
		t.Errorf("the error was cut to %d bytes, though %d more bytes fit", len(cut), smallLimit-len(dl))
	}
	if !strings.Contains(string(dl), `"error":"<&>éé`) {
		t.Errorf("the error is escaped: %.300s", dl)
	}
}

// A dead letter whose data alone would take it over the limit leaves the
// data out, says how large it was, and carries the error whole.
func TestADeadLetterOmitsDataThatCannotFit(t *testing.T) {
	t.Parallel()
	data := `"` + strings.Repeat("d", smallLimit-100) + `"`
	b := setupSmallLimit(t, data)
	dl := b.deadLetterOf(t, "no <good>")
	d := decodeDeadLetter(t, dl)
	if len(dl) > smallLimit || d.Data != nil || d.DataOmitted == nil || d.DataOmitted.Bytes != len(data) || d.Error != "no <good>" {
		t.Fatalf("dead letter %s: want no data, dataOmitted of %d bytes and the error whole", dl, len(data))
	}
}

// A message that takes more than any pop's answer can carry is
// dead-lettered by the pop that finds it, once, saying why, and counted;
// the messages after it are delivered.
func TestAPopDeadLettersAMessageTooLargeToDeliver(t *testing.T) {
	t.Parallel()
	b := setupConsumer(t, 0)
	b.pushData(t, "big", `"`+strings.Repeat("b", 20000)+`"`)
	b.push(t, -1, "small")
	reg := prometheus.NewRegistry()
	reg.MustRegister(b.store.Collector())
	pop := func() model.PopResult {
		r, err := b.store.Pop(context.Background(), model.PopQuery{Group: b.group, Max: 2, Lease: time.Minute, Consumer: "c",
			MaxBytes: 1 << 20, Room: 1 << 20, MaxDelivery: 16 << 10})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	r := pop()
	if len(r.Messages) != 1 || r.Messages[0].TxnID != "small" || r.DeadLettered != 1 || r.TooLarge != 1 {
		t.Fatalf("pop: %+v; want small delivered, big dead-lettered as too large", r)
	}
	dl := b.deadLetters(t)
	d := decodeDeadLetter(t, dl[0].Data)
	if len(dl) != 1 || !strings.HasPrefix(d.Error, "too large to deliver") || !strings.Contains(d.Error, "16384") ||
		d.DataOmitted != nil || len(d.Data) != 20002 {
		t.Fatalf("dead letter %.300s", dl[0].Data)
	}
	b.undo(t, r.LeaseID)
	if r := pop(); r.DeadLettered != 0 || len(r.Messages) != 1 {
		t.Fatalf("pop after: %+v; want small again, nothing dead-lettered", r)
	}
	want := `
# HELP queengate_group_undeliverable_total Messages dead-lettered by this gateway's pops because they were too large to deliver, per queue and group.
# TYPE queengate_group_undeliverable_total counter
queengate_group_undeliverable_total{group="g",queue="` + b.queue + `"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "queengate_group_undeliverable_total"); err != nil {
		t.Error(err)
	}
}
