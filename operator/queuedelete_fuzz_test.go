package operator

import (
	"encoding/json"
	"testing"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/internal/bodyref"
)

// refPurge is a purge's optional body.
var refPurge = bodyref.Object{Fields: map[string]bodyref.Rule{"partition": bodyref.Matching(bodyref.Name)}}

func FuzzDecodePurge(f *testing.F) {
	for _, s := range []string{`{"partition":"p"}`, `{"partition":5}`, `{"partition":""}`, `{"Partition":"p"}`, `[]`, `{"partition":"p","partition":"q"}`} {
		f.Add([]byte(s))
	}
	bodyref.FuzzDecoder(f, refPurge, true, decodePurge, func(req queengate.QueuePurgeRequest, vals map[string]json.RawMessage) string {
		return bodyref.SameString("partition", req.Partition, vals)
	})
}
