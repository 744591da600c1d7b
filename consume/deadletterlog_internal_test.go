package consume

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/rs/zerolog"

	"github.com/queengate/queengate/model"
)

// TestADeadLetterLogLineCarriesItsTraceID: the log line of a message
// dead-lettered with a traceparent header names its trace id; one
// without names none.
func TestADeadLetterLogLineCarriesItsTraceID(t *testing.T) {
	var buf bytes.Buffer
	log := zerolog.New(&buf)
	traced := model.DeadLetter{Queue: "q", Group: "g", MessageID: "m1",
		Headers: json.RawMessage(`{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}`)}
	plain := model.DeadLetter{Queue: "q", Group: "g", MessageID: "m2"}
	(*consumeMetrics)(nil).deadLettered(&log, []model.DeadLetter{traced, plain})
	lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
	if len(lines) != 2 {
		t.Fatalf("%d log lines, want 2: %s", len(lines), buf.Bytes())
	}
	var first, second map[string]any
	if json.Unmarshal(lines[0], &first) != nil || json.Unmarshal(lines[1], &second) != nil {
		t.Fatalf("log lines not JSON: %s", buf.Bytes())
	}
	if first["trace_id"] != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("traced dead letter logged %v, want its trace id", first)
	}
	if _, ok := second["trace_id"]; ok {
		t.Errorf("a dead letter without a traceparent logged a trace id: %v", second)
	}
}
