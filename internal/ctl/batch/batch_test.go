package batch

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

func TestArgMessages(t *testing.T) {
	t.Parallel()
	// Data byte for byte: {"a": 1} keeps its spaces (a retry of it must
	// not be a payload conflict), <>& are not escaped.
	got := FromArgs([]string{`{"a": 1}`, "hello", "42", `"quoted"`, "null", "[1,", `"<&>"`}, "", nil)
	want := []string{`{"data":{"a": 1}}`, `{"data":"hello"}`, `{"data":42}`, `{"data":"quoted"}`, `{"data":null}`, `{"data":"[1,"}`, `{"data":"<&>"}`}
	for i := range want {
		if string(got[i]) != want[i] {
			t.Errorf("message %d = %s, want %s", i, got[i], want[i])
		}
	}
	if got := FromArgs([]string{"x"}, "t-1", nil); string(got[0]) != `{"transactionId":"t-1","data":"x"}` {
		t.Errorf("with --txn-id: %s", got[0])
	}
}

// The README's example input pushes as it is: one message per line, its
// data byte for byte.
func TestExampleMessages(t *testing.T) {
	t.Parallel()
	f, err := os.Open("../../../testdata/messages.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	msgs, err := FromLines(f, false, nil)
	if err != nil || len(msgs) != 3 || string(msgs[1]) != `{"data":{"orderId": 9138, "amount": 12.50}}` {
		t.Errorf("testdata/messages.jsonl: %q, %v", msgs, err)
	}
}

func TestPlanBatches(t *testing.T) {
	t.Parallel()
	msgs := [][]byte{[]byte("aaaa"), []byte("bbbb"), []byte("cccc"), []byte("dddd"), []byte("eeee")}
	sizes := func(bs [][][]byte) []int {
		var n []int
		for _, b := range bs {
			n = append(n, len(b))
		}
		return n
	}
	// By count.
	bs, err := Plan(msgs, 2, 1<<20)
	if err != nil || !reflect.DeepEqual(sizes(bs), []int{2, 2, 1}) {
		t.Errorf("by count: %v %v", sizes(bs), err)
	}
	// By bytes: [aaaa,bbbb] is 11 bytes; a third would make 16.
	bs, err = Plan(msgs, 1000, 15)
	if err != nil || !reflect.DeepEqual(sizes(bs), []int{2, 2, 1}) {
		t.Errorf("by bytes: %v %v", sizes(bs), err)
	}
	bs, err = Plan(msgs, 1000, 16)
	if err != nil || !reflect.DeepEqual(sizes(bs), []int{3, 2}) {
		t.Errorf("by bytes, exact fit: %v %v", sizes(bs), err)
	}
	if _, err := Plan(msgs, 1000, 5); err == nil {
		t.Errorf("a message over the max payload: %v", err)
	}
}

// TestEnvelopeLines: with --envelope every line is checked as the
// gateway checks a message object, so that lines of data given with
// --envelope are refused before anything is sent, naming the line.
func TestEnvelopeLines(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		{`{"transactionId":"t-1","data":{"a": 1}}` + "\n" + `{"data":2}` + "\n{}\n", ""},
		{`{"transactionId":null,"data":1}`, ""},
		{`{"data":1}` + "\n" + `{"amount":5}`, `stdin line 2: unknown field "amount": with --envelope each line is a message object`},
		{`{"orderId":9137,"amount":99.5}`, `(without --envelope each line is the data)`},
		{`{"data":1,"data":2}`, `stdin line 1: field "data" given twice`},
		{`{"transactionId":"a","transactionId":"b"}`, `field "transactionId" given twice`},
		{`{"transactionID":"a"}`, `unknown field "transactionID"`},
		{`[1]`, `each line is a message object`},
		{`{"transactionId":7}`, `transactionId must be a string`},
	} {
		_, err := FromLines(strings.NewReader(c.in), true, nil)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%q: %v; want it accepted", c.in, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%q: %v; want an error saying %s", c.in, err, c.want)
		}
	}
}
