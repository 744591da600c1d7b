package wire

import (
	"bytes"
	"encoding/json"
	"testing"

	queengate "github.com/queengate/queengate"
)

// FuzzAckAnswerEncodesAsEncodingJSON holds the hand-written ack answer
// (alone, and carried by a pop's answer) to the bytes encoding/json
// writes for it, whatever the transactionIds hold: <, > and &, control
// bytes, invalid UTF-8, U+2028.
func FuzzAckAnswerEncodesAsEncodingJSON(f *testing.F) {
	f.Add("t1", "t<2>&", int64(7), true, 0)
	f.Add("", "\x00\xff\u2028\"\\", int64(0), false, 3)
	f.Fuzz(func(t *testing.T, id1, id2 string, next int64, ended bool, dead int) {
		off := next + 1
		a := queengate.AckAnswer{Items: []queengate.AckResult{
			{Index: 0, TransactionID: id1, Offset: &off, Result: "acked"},
			{Index: 1, TransactionID: id2, Result: id2},
		}, NextOffset: next, LeaseEnded: ended, DeadLettered: dead}
		want, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendAckAnswer(nil, &a); !bytes.Equal(got, want) {
			t.Fatalf("AppendAckAnswer wrote\n%s\nencoding/json\n%s", got, want)
		}
		if got := appendString([]byte("x"), id1); !bytes.Equal(got[1:], mustMarshal(id1)) {
			t.Fatalf("appendString(%q) wrote %s", id1, got[1:])
		}
	})
}
