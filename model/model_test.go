package model

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
)

func TestMessageIDRoundTrips(t *testing.T) {
	for _, c := range [][2]int64{{1, 0}, {42, 1 << 40}, {1<<62 + 7, 1<<63 - 1}} {
		id := MessageID(c[0], c[1])
		p, o, err := ParseMessageID(id)
		if err != nil || p != c[0] || o != c[1] {
			t.Errorf("MessageID(%d, %d) = %s, parsed back as %d, %d, %v", c[0], c[1], id, p, o, err)
		}
	}
	for _, bad := range []string{"", "00000000-0000-0001-0000-00000000000", "0000000000000001000000000000000000ab", "0000000x-0000-0001-0000-000000000000"} {
		if _, _, err := ParseMessageID(bad); err == nil {
			t.Errorf("ParseMessageID(%q) accepted it", bad)
		}
	}
}

func TestProbeNamesRoundTrip(t *testing.T) {
	for _, p := range []Probe{ProbeOff, ProbeSkipped, ProbeNarrowed, ProbeFull} {
		if got, ok := ParseProbe(p.String()); !ok || got != p {
			t.Errorf("ParseProbe(%q) = %v, %v", p, got, ok)
		}
	}
	if _, ok := ParseProbe("sideways"); ok {
		t.Error("an unknown probe name parsed")
	}
}

func TestOptionErrorsAreInvalidOptions(t *testing.T) {
	bad, ok := -1, 3600
	err := OptionsPatch{DedupWindowSeconds: &bad, RetentionSeconds: &ok}.Validate()
	var oe *OptionError
	if !errors.Is(err, ErrInvalidOption) || !errors.As(err, &oe) || oe.Option != "dedupWindowSeconds" {
		t.Errorf("Validate of a negative window: %v", err)
	}
	if err := (OptionsPatch{RetentionSeconds: &ok}).Validate(); err != nil {
		t.Errorf("Validate of a valid patch: %v", err)
	}
}

// unsent is an error a driver marks as raised before anything was sent.
type unsent struct{}

func (unsent) Error() string     { return "dial refused" }
func (unsent) SafeToRetry() bool { return true }

func TestSafeToRetryReadsTheDriversMark(t *testing.T) {
	if !SafeToRetry(fmt.Errorf("pgstore: push: %w", unsent{})) {
		t.Error("a wrapped error marked safe to retry was not")
	}
	if SafeToRetry(errors.New("connection reset after the statement")) {
		t.Error("an unmarked error was taken as safe to retry")
	}
}

type sqlStateError string

func (e sqlStateError) Error() string    { return "server said " + string(e) }
func (e sqlStateError) SQLState() string { return string(e) }

// Unreachable tells a store out of reach (retry later) from one that
// refused the statement, by what the driver's errors implement.
func TestUnreachable(t *testing.T) {
	t.Parallel()
	_, dialErr := net.Dial("tcp", "127.0.0.1:1") // nothing listens on port 1
	for _, c := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("pop: %w", dialErr), true},
		{fmt.Errorf("pop: %w", io.ErrUnexpectedEOF), true},
		{fmt.Errorf("pop: %w", context.DeadlineExceeded), true},
		{ErrStoreDown, true},
		{sqlStateError("08006"), true},  // connection failure
		{sqlStateError("57P01"), true},  // admin shutdown
		{sqlStateError("23505"), false}, // unique violation: refused, not unreachable
		{errors.New("syntax"), false},
	} {
		if got := Unreachable(c.err); got != c.want {
			t.Errorf("Unreachable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// TestTraceIDReadsAWellFormedTraceparentOnly: the trace id of a W3C
// traceparent header, and nothing for a malformed one, none, or another
// header whose value holds the text of one.
func TestTraceIDReadsAWellFormedTraceparentOnly(t *testing.T) {
	h := func(v string) []byte {
		return AppendMeta(nil, []Header{{Name: "traceparent", Values: []string{v}}}, false)
	}
	inValue := AppendMeta(nil, []Header{{Name: "x", Values: []string{`"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"`}}}, false)
	for meta, want := range map[string]string{
		string(h("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")):        "4bf92f3577b34da6a3ce929d0e0e4736",
		string(h("00-XYZ-00f067aa0ba902b7-01")):                                     "",
		string(h("garbage")):                                                        "",
		string(AppendMeta(nil, []Header{{Name: "x", Values: []string{"y"}}}, true)): "",
		string(inValue): "",
		"":              "",
	} {
		if got := TraceID([]byte(meta)); got != want {
			t.Errorf("TraceID(%s) = %q, want %q", meta, got, want)
		}
	}
}
