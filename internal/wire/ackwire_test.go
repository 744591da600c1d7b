package wire

import (
	"encoding/json"
	"reflect"
	"testing"

	queengate "github.com/queengate/queengate"
)

// FuzzAckAnswerDecodesAsEncodingJSON holds the hand-written ack answer
// (alone, and carried by a pop's answer) to what encoding/json writes for
// it, whatever the transactionIds hold (<, > and &, control bytes,
// invalid UTF-8, U+2028): decoded, the same answer, and the same bytes
// but for the strings' escapes (which MarshalledStringBound bounds, as
// FuzzStringLengths checks), so that what bounds one bounds the other.
func FuzzAckAnswerDecodesAsEncodingJSON(f *testing.F) {
	f.Add("t1", "t<2>&", int64(7), true, 0)
	f.Add("", "\x00\xff\u2028\"\\", int64(0), false, 3)
	f.Fuzz(func(t *testing.T, id1, id2 string, next int64, ended bool, dead int) {
		off := next + 1
		a := queengate.AckAnswer{Items: []queengate.AckResult{
			{Index: 0, TransactionID: id1, Offset: &off, Result: "acked"},
			{Index: 1, TransactionID: id2, Result: id2},
		}, NextOffset: next, LeaseEnded: ended, DeadLettered: dead}
		marshalled, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		got := AppendAckAnswer(nil, &a)
		want, hand := decodeStrict[queengate.AckAnswer](t, marshalled), decodeStrict[queengate.AckAnswer](t, got)
		escapes := jsonStringLen(id2) - len(mustMarshal(id2)) // the second result
		for _, id := range []string{id1, id2} {
			if id != "" {
				escapes += jsonStringLen(id) - len(mustMarshal(id))
			}
		}
		if !reflect.DeepEqual(hand, want) || len(got) != len(marshalled)+escapes {
			t.Fatalf("AppendAckAnswer wrote\n%s\nencoding/json\n%s", got, marshalled)
		}
	})
}
