package wire

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/nats-io/nats.go"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/internal/jsonscan"
	"github.com/queengate/queengate/model"
)

// A message's headers and the encoding of its data (docs/protocol.md,
// "Headers" and "Binary data") are checked here, whichever way they came
// (a message's "headers" and "dataEncoding" fields, a NATS message's own
// headers, a JetStream publish), and written as the message's meta
// (model.AppendMeta).

// reservedPrefix starts the header names NATS and JetStream give a
// meaning to: a JetStream publish reads the ones it honours, and no
// message stores one.
const reservedPrefix = "nats-"

// ParseHeaders reads a message's "headers" field: an object of names to
// a string or an array of strings. JSON null and {} are no headers.
func ParseHeaders(raw []byte) ([]model.Header, string) {
	if string(raw) == "null" {
		return nil, ""
	}
	members, err := ScanObject(raw, func() string { return "headers" })
	if err != nil {
		return nil, err.Error()
	}
	out := make([]model.Header, len(members))
	single := make([]string, len(members)) // the usual one value of each header, in one allocation
	for i, m := range members {
		out[i].Name = string(m.Key)
		if v, ok := DecodeString(m.Raw); ok {
			single[i] = v
			out[i].Values = single[i : i+1 : i+1]
			continue
		}
		var why string
		if out[i].Values, why = headerValues(m.Raw); why != "" {
			return nil, fmt.Sprintf("header %q: %s", Clip(out[i].Name), why)
		}
	}
	return out, CheckHeaders(out)
}

// headerValues reads the value of a header that is not one string: an
// array of 1 or more strings.
func headerValues(raw []byte) ([]string, string) {
	const want = "must be a string or an array of strings"
	if len(raw) == 0 || raw[0] != '[' {
		return nil, want
	}
	var values []string
	s := &jsonscan.Scanner{B: raw}
	s.Array(func() {
		s.WS()
		start := s.I
		s.Value()
		v, ok := DecodeString(raw[start:s.I])
		if !ok {
			s.Fail(want)
		}
		values = append(values, v)
	})
	switch {
	case s.Err != nil:
		return nil, want
	case len(values) == 0:
		return nil, "has no value: send at least one, or leave the header out"
	}
	return values, ""
}

// CheckHeaders checks headers against the rules NATS sets for its own
// headers and queengate's limits; it says what to fix, or "".
func CheckHeaders(headers []model.Header) string {
	if len(headers) > model.MaxHeaders {
		return fmt.Sprintf("%d headers, over the limit of %d per message", len(headers), model.MaxHeaders)
	}
	size := 0
	for i, h := range headers {
		if why := checkHeaderName(h.Name); why != "" {
			return why
		}
		for _, earlier := range headers[:i] {
			if earlier.Name == h.Name {
				return fmt.Sprintf("header %q is given twice: give its values once, as an array", Clip(h.Name))
			}
		}
		size += len(h.Name)
		for _, v := range h.Values {
			if why := checkHeaderValue(v); why != "" {
				return fmt.Sprintf("header %q: %s", Clip(h.Name), why)
			}
			size += len(v)
		}
	}
	if size > model.MaxHeaderBytes {
		return fmt.Sprintf("headers take %d bytes (names and values), over the limit of %d per message", size, model.MaxHeaderBytes)
	}
	return ""
}

// checkHeaderName: 1 to MaxHeaderName printable ASCII characters, no
// colon (it ends a name in NATS's header block), and not a name NATS
// reserves.
func checkHeaderName(name string) string {
	switch {
	case name == "" || len(name) > model.MaxHeaderName:
		return fmt.Sprintf("header name %q must be 1-%d characters", Clip(name), model.MaxHeaderName)
	case reserved(name):
		return fmt.Sprintf("header %q: names starting with Nats- are NATS's own; a JetStream publish reads the ones queengate honours (docs/protocol.md)", Clip(name))
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c <= ' ' || c >= 0x7f || c == ':' {
			return fmt.Sprintf("header name %q may hold printable ASCII characters only, no space or colon", Clip(name))
		}
	}
	return ""
}

// reserved says name starts with Nats-, in any case.
func reserved(name string) bool {
	return len(name) >= len(reservedPrefix) && strings.EqualFold(name[:len(reservedPrefix)], reservedPrefix)
}

// checkHeaderValue: UTF-8 without control characters but tab (a CR or
// LF would end the header in NATS's header block).
func checkHeaderValue(v string) string {
	if !utf8.ValidString(v) {
		return "its value is not UTF-8"
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
			return "its value holds a control character (only tab is allowed)"
		}
	}
	return ""
}

// NATSHeaders are a NATS message's headers as a message's, by name.
func NATSHeaders(h nats.Header) []model.Header {
	if len(h) == 0 {
		return nil
	}
	out := make([]model.Header, 0, len(h))
	for name, values := range h {
		out = append(out, model.Header{Name: name, Values: values})
	}
	slices.SortFunc(out, func(a, b model.Header) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// binaryData reads the data of a message whose dataEncoding is base64: a
// JSON string of standard base64, which is stored written the canonical
// way (padded, no escapes), so that equal bytes are stored equal.
func binaryData(raw []byte) ([]byte, string) {
	s, ok := DecodeString(raw)
	if !ok {
		return nil, `data must be a JSON string of base64 when dataEncoding is "base64"`
	}
	decoded, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Sprintf("data is not standard base64 (RFC 4648, padded): %v", err)
	}
	return QuoteBase64(decoded), ""
}

// QuoteBase64 is binary data as stored: the JSON string of its base64.
func QuoteBase64(b []byte) []byte {
	out := make([]byte, 0, base64.StdEncoding.EncodedLen(len(b))+2)
	out = append(out, '"')
	out = base64.StdEncoding.AppendEncode(out, b)
	return append(out, '"')
}

// dataEncoding reads a message's dataEncoding field: "base64", or null
// and "json" for JSON data.
func dataEncoding(raw []byte) (binary bool, why string) {
	switch string(raw) {
	case "", "null", `"json"`:
		return false, ""
	case `"base64"`:
		return true, ""
	}
	return false, fmt.Sprintf(`dataEncoding must be "base64" (data is a string of base64) or "json" (the default), not %s`, Excerpt(raw))
}

// Payload is raw message i's data and meta as stored: its headers
// checked, its binary data canonical.
func (m *RawMessage) Payload(i int) (data, meta []byte, werr *queengate.Error) {
	data, meta, why := Payload(m.Data, m.Headers, m.DataEncoding)
	if why != "" {
		return nil, nil, BadInput("message %d: %s", i, why)
	}
	return data, meta, nil
}

// Payload is the data and meta to store of a message whose "data",
// "headers" and "dataEncoding" fields are these raw values (nil where
// absent), or what to fix.
func Payload(rawData, rawHeaders, rawEncoding []byte) (data, meta []byte, why string) {
	binary, why := dataEncoding(rawEncoding)
	var headers []model.Header
	if why == "" && rawHeaders != nil {
		headers, why = ParseHeaders(rawHeaders)
	}
	data = rawData
	if why == "" && binary {
		data, why = binaryData(rawData)
	}
	if why != "" {
		return nil, nil, why
	}
	if len(headers) == 0 && !binary {
		return data, nil, ""
	}
	// The meta is about the size of the raw headers: one allocation.
	meta = make([]byte, 0, len(rawHeaders)+len(`{"headers":,"dataEncoding":"base64"}`))
	return data, model.AppendMeta(meta, headers, binary), ""
}

// sameMeta says a and b have the same raw headers and data encoding.
func sameMeta(a, b *RawMessage) bool {
	return bytes.Equal(a.Headers, b.Headers) && bytes.Equal(a.DataEncoding, b.DataEncoding) &&
		(a.Headers == nil) == (b.Headers == nil) && (a.DataEncoding == nil) == (b.DataEncoding == nil)
}

// WithNATSHeaders gives a push's one message the NATS message's own
// headers (docs/protocol.md, "Headers"): refused beside a body's headers,
// or for more than one message, where they would be ambiguous.
func WithNATSHeaders(msgs []model.Incoming, h nats.Header) *queengate.Error {
	headers := NATSHeaders(h)
	if len(headers) == 0 {
		return nil
	}
	switch {
	case len(msgs) != 1:
		return BadInput("NATS headers name one message's headers: send them with a single message, or put each message's in its \"headers\" field")
	case model.MetaHeadersRaw(msgs[0].Meta) != nil:
		return BadInput("the message has headers both in its \"headers\" field and as NATS headers: send them one way")
	}
	if why := CheckHeaders(headers); why != "" {
		return BadInput("%s", why)
	}
	msgs[0].Meta = model.AppendMeta(nil, headers, model.IsBinary(msgs[0].Meta))
	return nil
}
