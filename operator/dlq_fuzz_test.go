package operator

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/internal/bodyref"
	"github.com/queengate/queengate/internal/wire"
)

// refDeadLetters is a dead-letter list's or redrive's optional body: a
// range, if both ends are given, from the lower offset.
var refDeadLetters = bodyref.Object{
	Fields: map[string]bodyref.Rule{"partition": bodyref.Matching(bodyref.Name), "group": bodyref.Matching(bodyref.Name),
		"fromOffset": bodyref.WholeFrom(0, 1<<63-1), "toOffset": bodyref.WholeFrom(0, 1<<63-1), "limit": bodyref.WholeFrom(1, queengate.MaxRedrive)},
	Across: func(m map[string]json.RawMessage) bool {
		from, okFrom := bodyref.Whole(m["fromOffset"])
		to, okTo := bodyref.Whole(m["toOffset"])
		return !okFrom || !okTo || from <= to
	},
}

func FuzzDecodeDeadLetters(f *testing.F) {
	for _, s := range []string{`{"partition":"p","group":"g","fromOffset":1,"toOffset":0}`, `{"limit":0}`, `{"limit":1001}`,
		`{"fromOffset":-1}`, `{"group":null}`, `{"Group":"g"}`} {
		f.Add([]byte(s))
	}
	bodyref.FuzzDecoder(f, refDeadLetters, true, decodeDeadLetters, func(req queengate.DeadLettersRequest, vals map[string]json.RawMessage) string {
		if n, ok := bodyref.Whole(vals["limit"]); int64(req.Limit) != n || !ok && req.Limit != 0 {
			return fmt.Sprintf("limit %d, the reference %s", req.Limit, vals["limit"])
		}
		if n, ok := bodyref.Whole(vals["fromOffset"]); ok != (req.FromOffset != nil) || ok && *req.FromOffset != n {
			return fmt.Sprintf("fromOffset %v, the reference %s", req.FromOffset, vals["fromOffset"])
		}
		if d := bodyref.SameString("partition", req.Partition, vals); d != "" {
			return d
		}
		return bodyref.SameString("group", req.Group, vals)
	})
}

// A list of dead letters is cut to what fits the answer's budget, and
// says so; each listed error is cut to MaxListedError bytes.
func TestADeadLetterListFitsItsBudget(t *testing.T) {
	long := strings.Repeat("é\"", 3000)
	var a queengate.DeadLettersAnswer
	for i := range 500 {
		a.DeadLetters = append(a.DeadLetters, queengate.DeadLetterView{Partition: strings.Repeat("p", 128), Offset: int64(i),
			TransactionID: strings.Repeat("\u0001", 256), Error: wire.ClipBytes(long, queengate.MaxListedError)})
	}
	if e := a.DeadLetters[0].Error; len(e) > queengate.MaxListedError || !utf8.ValidString(e) {
		t.Fatalf("a listed error of %d bytes (valid UTF-8: %v)", len(e), utf8.ValidString(e))
	}
	const budget = 64 << 10
	fitDeadLetters(&a, budget)
	if n := wire.EncodedLen(a); n > budget || !a.More || len(a.DeadLetters) == 0 || len(a.DeadLetters) == 500 {
		t.Fatalf("%d bytes for %d dead letters (more %v), budget %d", n, len(a.DeadLetters), a.More, budget)
	}
}
