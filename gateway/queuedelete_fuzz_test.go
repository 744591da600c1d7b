package gateway

import (
	"encoding/json"
	"testing"

	queengate "github.com/queengate/queengate"
)

// refPurge is a purge's optional body.
var refPurge = refObject{fields: map[string]refRule{"partition": matching(refName)}}

func FuzzDecodePurge(f *testing.F) {
	for _, s := range []string{`{"partition":"p"}`, `{"partition":5}`, `{"partition":""}`, `{"Partition":"p"}`, `[]`, `{"partition":"p","partition":"q"}`} {
		f.Add([]byte(s))
	}
	fuzzDecoder(f, refPurge, true, decodePurge, func(req queengate.QueuePurgeRequest, vals map[string]json.RawMessage) string {
		return sameString("partition", req.Partition, vals)
	})
}
