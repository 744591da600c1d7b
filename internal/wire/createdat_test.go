package wire

import (
	"testing"
	"time"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/model"
)

// createdAts are the createdAt of an answer's messages in a row: runs
// of one instant (one of them given in two zones), an instant after
// another, one coming back after others, and the zero time.
func createdAts() []time.Time {
	at := time.Date(2026, 12, 6, 7, 0, 0, 123456000, time.UTC)
	east := time.FixedZone("east", 5*3600)
	return []time.Time{at, at, at.In(east), at.Add(time.Microsecond), at.Add(time.Microsecond), at,
		at.Add(time.Second).In(east), time.Time{}, time.Time{}, at}
}

// TestEachMessageCarriesItsOwnCreatedAt: a createdAt written once and
// copied for the messages after it that share it is each message's own,
// in a pop's answer (over several partitions) and a read's.
func TestEachMessageCarriesItsOwnCreatedAt(t *testing.T) {
	times := createdAts()
	deliveries := func(pid int64) []model.LeasedMessage {
		ds := make([]model.LeasedMessage, len(times))
		for i, at := range times {
			ds[i] = model.LeasedMessage{LogMessage: model.LogMessage{PartitionID: pid, Offset: int64(i), TxnID: "t",
				CreatedAt: at, Data: []byte("1")}, Attempts: 1}
		}
		return ds
	}
	r := model.PopResult{PartitionID: 1, Partition: "p", LeaseID: "l", LeaseUntil: times[0], Messages: deliveries(1)}
	more := []model.PopResult{{PartitionID: 2, Partition: "q", LeaseID: "m", LeaseUntil: times[3], Messages: deliveries(2)}}
	pop := decodeStrict[queengate.PopAnswer](t, EncodePopLeases("queue", "group", &r, more, "ack", nil))
	for _, lease := range pop.Leases() {
		checkCreatedAts(t, "pop answer of "+lease.Partition, times, func(i int) time.Time { return lease.Messages[i].CreatedAt })
	}

	read := queengate.ReadAnswer{Queue: "queue", Partition: "p", PartitionID: 1}
	for i, at := range times {
		read.Messages = append(read.Messages, queengate.StoredMessage{Offset: int64(i), MessageID: model.MessageID(1, int64(i)),
			TransactionID: "t", CreatedAt: at, Data: []byte("1")})
	}
	got := decodeStrict[queengate.ReadAnswer](t, EncodeRead(&read, nil))
	checkCreatedAts(t, "read answer", times, func(i int) time.Time { return got.Messages[i].CreatedAt })
}

func checkCreatedAts(t *testing.T, what string, want []time.Time, got func(i int) time.Time) {
	t.Helper()
	for i, at := range want {
		if g := got(i); !g.Equal(at) || g.Location() != time.UTC {
			t.Errorf("%s: message %d's createdAt decodes to %v, want %v in UTC", what, i, g, at)
		}
	}
}

// TestAPopAnswerIsWrittenInOneAllocation: writing a pop's answer takes
// its buffer, whatever number of messages it holds (a messageId was a
// string per message).
func TestAPopAnswerIsWrittenInOneAllocation(t *testing.T) {
	at := time.Date(2026, 12, 6, 7, 0, 0, 0, time.UTC)
	r := model.PopResult{PartitionID: 7, Partition: "p", LeaseID: "0b0e6d1c-6c1a-4a4e-9d3f-6a3c6f0e2b1d", LeaseUntil: at}
	for i := range 100 {
		r.Messages = append(r.Messages, model.LeasedMessage{LogMessage: model.LogMessage{PartitionID: 7, Offset: int64(i),
			TxnID: "order-é", CreatedAt: at.Add(time.Duration(i/10) * time.Millisecond), Data: []byte(`{"n":1}`)}, Attempts: 1 + i%2,
			LastError: "handler: \"timeout\""})
	}
	if allocs := testing.AllocsPerRun(20, func() { EncodePop("queue", "group", &r, nil) }); allocs > 1 {
		t.Fatalf("writing a pop's answer of %d messages allocates %.0f times; want 1", len(r.Messages), allocs)
	}
}
