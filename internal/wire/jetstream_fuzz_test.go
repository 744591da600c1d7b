package wire_test

import (
	"bytes"
	"testing"

	"github.com/nats-io/nats.go"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/internal/wire"
	"github.com/queengate/queengate/model"
)

// FuzzDecodeJetStream: whatever a JetStream publish's body, what is stored
// is JSON the log can hold, and the bytes it carries are the body's,
// byte for byte (JSON data as it came, anything else as base64).
func FuzzDecodeJetStream(f *testing.F) {
	for _, seed := range []string{`{"a":1}`, ` {"a":1}`, "plain", "", "\x00\xff", `"\u0000"`, `[1,2`, `123`, "null"} {
		f.Add([]byte(seed), "trace")
	}
	f.Fuzz(func(t *testing.T, body []byte, value string) {
		h := nats.Header{"X-Value": {value}}
		msg, perr := wire.DecodeJetStream(body, h, "q", 1<<20)
		if perr != nil {
			if perr.Code != 400 && perr.Code != 413 {
				t.Fatalf("refused with %d: %s", perr.Code, perr.Description)
			}
			return
		}
		if err := wire.CheckValue(msg.Data); err != nil {
			t.Fatalf("stored data %q is not JSON the log holds: %v", msg.Data, err)
		}
		if got := model.DataBytes(msg.Data, msg.Meta); !bytes.Equal(got, body) && !(len(body) == 0 && len(got) == 0) {
			t.Fatalf("body %q stored as %q (meta %s), carrying %q", body, msg.Data, msg.Meta, got)
		}
		var headers queengate.Headers
		err := headers.UnmarshalJSON(model.MetaHeadersRaw(msg.Meta))
		if err != nil || headers["X-Value"][0] != value {
			t.Fatalf("header %q stored as %v (%s), %v", value, headers, msg.Meta, err)
		}
	})
}
