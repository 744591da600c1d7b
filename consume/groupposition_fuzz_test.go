package consume

import (
	"encoding/json"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/queengate/queengate/internal/bodyref"
	"github.com/queengate/queengate/model"
)

// refOffsets is a group create's "offsets": an object of at least one
// partition name, each once, to a whole number from 0.
func refOffsets(raw json.RawMessage) bool {
	keys, vals, isObj := bodyref.Members(raw)
	if !isObj || len(keys) == 0 {
		return false
	}
	seen := map[string]bool{}
	for _, k := range keys {
		if !bodyref.Name.MatchString(k) || seen[k] {
			return false
		}
		seen[k] = true
	}
	for _, v := range vals {
		if !bodyref.WholeFrom(0, 1<<63-1)(v) {
			return false
		}
	}
	return true
}

var groupPositionSeeds = []string{
	`{"start":"latest"}`, `{"start":"earliest"}`, `{"start":"Latest"}`, `{"offsets":{"p0":1,"p1":0}}`, `{"offsets":{}}`,
	`{"offsets":{"p0":1,"p0":2}}`, `{"offsets":{"a.b":1}}`, `{"offsets":{"p":-1}}`, `{"offsets":[]}`,
	`{"time":"2026-12-01T09:00:00Z"}`, `{"time":"2026-12-01T09:00:00"}`, `{"time":"0001-01-01T00:00:00Z"}`,
	`{"start":"latest","offsets":{"p":1}}`, `{"offset":0}`, `{"offset":0,"partition":"p"}`, `{"offset":1,"time":"2026-12-01T09:00:00Z"}`,
	`{"partition":"p"}`, `{"offset":9223372036854775807}`, `{"offset":9223372036854775808}`, `{"offset":1e3}`,
}

// FuzzDecodeGroupCreate: no body, or at most one of "start" ("earliest"
// or "latest"), "offsets" and "time"; what is decoded is the one given.
func FuzzDecodeGroupCreate(f *testing.F) {
	for _, s := range groupPositionSeeds {
		f.Add([]byte(s))
	}
	ref := bodyref.Object{
		Fields: map[string]bodyref.Rule{"start": bodyref.OneOf("earliest", "latest"), "offsets": refOffsets, "time": bodyref.RFC3339},
		Across: func(m map[string]json.RawMessage) bool { return len(m) <= 1 },
	}
	bodyref.FuzzDecoder(f, ref, true, decodeGroupCreate, func(got model.GroupStart, vals map[string]json.RawMessage) string {
		want := model.GroupStart{From: model.StartEarliest}
		if s, ok := bodyref.String(vals["start"]); ok {
			want.From = s
		}
		if raw, ok := vals["offsets"]; ok {
			want.From = model.StartOffsets
			_ = json.Unmarshal(raw, &want.Offsets)
		}
		if s, ok := bodyref.String(vals["time"]); ok {
			want.From = model.StartTime
			want.Time, _ = time.Parse(time.RFC3339Nano, s)
		}
		if got.From != want.From || !got.Time.Equal(want.Time) || !maps.Equal(got.Offsets, want.Offsets) {
			return fmt.Sprintf("decoded %+v, the reference %+v", got, want)
		}
		return ""
	})
}

// FuzzDecodeSeek: exactly one of "offset" (from 0) and "time", and
// "partition" optionally; what is decoded is what was given.
func FuzzDecodeSeek(f *testing.F) {
	for _, s := range groupPositionSeeds {
		f.Add([]byte(s))
	}
	ref := bodyref.Object{
		Fields: map[string]bodyref.Rule{"partition": bodyref.Matching(bodyref.Name), "offset": bodyref.WholeFrom(0, 1<<63-1), "time": bodyref.RFC3339},
		Across: func(m map[string]json.RawMessage) bool {
			_, off := m["offset"]
			_, at := m["time"]
			return off != at
		},
	}
	bodyref.FuzzDecoder(f, ref, false, decodeSeek, func(got model.Seek, vals map[string]json.RawMessage) string {
		want := model.Seek{Offset: -1}
		want.Partition, _ = bodyref.String(vals["partition"])
		if n, ok := bodyref.Whole(vals["offset"]); ok {
			want.Offset = n
		}
		if s, ok := bodyref.String(vals["time"]); ok {
			want.Time, _ = time.Parse(time.RFC3339Nano, s)
			if want.Time.IsZero() {
				want.Time = time.Unix(0, 0) // year 1 is before every message, as the epoch
			}
		}
		if got.Partition != want.Partition || got.Offset != want.Offset || !got.Time.Equal(want.Time) {
			return fmt.Sprintf("decoded %+v, the reference %+v", got, want)
		}
		return ""
	})
}
