package queengate

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"slices"
)

// Headers are a message's headers (docs/protocol.md, "Headers"): names to
// their values, as NATS keeps a message's (nats.Header(h) is one). On the
// wire a header with one value is a string, one with several an array.
type Headers map[string][]string

// MarshalJSON writes the headers as the protocol does, names in order.
func (h Headers) MarshalJSON() ([]byte, error) {
	names := make([]string, 0, len(h))
	for name := range h {
		names = append(names, name)
	}
	slices.Sort(names)
	b := []byte{'{'}
	for i, name := range names {
		if i > 0 {
			b = append(b, ',')
		}
		k, _ := json.Marshal(name)
		b = append(append(b, k...), ':')
		var v []byte
		var err error
		if values := h[name]; len(values) == 1 {
			v, err = json.Marshal(values[0])
		} else {
			v, err = json.Marshal(values)
		}
		if err != nil {
			return nil, err
		}
		b = append(b, v...)
	}
	return append(b, '}'), nil
}

// UnmarshalJSON reads headers whose values are a string or an array of
// strings.
func (h *Headers) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	if raw == nil {
		*h = nil
		return nil
	}
	out := make(Headers, len(raw))
	for name, v := range raw {
		var one string
		if json.Unmarshal(v, &one) == nil {
			out[name] = []string{one}
			continue
		}
		var many []string
		if err := json.Unmarshal(v, &many); err != nil {
			return errors.New("queengate: a header's value must be a string or an array of strings")
		}
		out[name] = many
	}
	*h = out
	return nil
}

// DataEncodingBase64 is the dataEncoding of binary data: Data is then a
// JSON string holding its base64 (docs/protocol.md, "Binary data").
const DataEncodingBase64 = "base64"

// Bytes is the data the message carries: for binary data (DataEncoding
// base64) the bytes its base64 stands for, otherwise Data, the JSON text
// as pushed.
func (m *StoredMessage) Bytes() ([]byte, error) {
	if m.DataEncoding != DataEncodingBase64 {
		return m.Data, nil
	}
	var s string
	if err := json.Unmarshal(m.Data, &s); err != nil {
		return nil, err
	}
	return base64.StdEncoding.DecodeString(s)
}
