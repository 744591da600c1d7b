package model

import (
	"bytes"
	"encoding/base64"
	"strings"
)

// A message's meta is its headers and the encoding of its data, written
// as the JSON members its answers carry beside "data":
//
//	{"headers":{"traceparent":"00-…","x-tags":["a","b"]},"dataEncoding":"base64"}
//
// either member absent, nil for a message with neither (most of them).
// The gateway writes it, never a producer's bytes as they came, so its
// members can be spliced into any answer object as they are. A header
// with one value is a string, one with several an array of them.
//
// Binary data (dataEncoding base64) is carried in Data as the JSON
// string of its base64: reads hand the stored text out as it is.

// Header is one header of a message: a name and its values in order.
type Header struct {
	Name   string
	Values []string
}

// Limits on a message's headers (docs/protocol.md, "Headers").
const (
	MaxHeaders      = 64
	MaxHeaderBytes  = 8 << 10 // names and values of one message together
	MaxHeaderName   = 256
	DataEncodingB64 = "base64"
)

const binaryMember = `"dataEncoding":"base64"`

// AppendMeta appends the meta of a message with headers (nil: none) and,
// when binary, base64 data; it appends nothing for a message with
// neither.
func AppendMeta(b []byte, headers []Header, binary bool) []byte {
	if len(headers) == 0 {
		return appendMeta(b, nil, binary)
	}
	return appendMeta(b, func(b []byte) []byte { return appendHeaders(b, headers) }, binary)
}

// appendMeta appends a meta object: the headers object headers writes
// (nil: none), then the binary member; nothing for neither.
func appendMeta(b []byte, headers func([]byte) []byte, binary bool) []byte {
	if headers == nil && !binary {
		return b
	}
	b = append(b, '{')
	if headers != nil {
		b = headers(append(b, `"headers":`...))
		if binary {
			b = append(b, ',')
		}
	}
	if binary {
		b = append(b, binaryMember...)
	}
	return append(b, '}')
}

// appendHeaders appends headers as a JSON object: a header of one value
// as a string, one of several as an array.
func appendHeaders(b []byte, headers []Header) []byte {
	b = append(b, '{')
	for i, h := range headers {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(appendString(b, h.Name), ':')
		if len(h.Values) == 1 {
			b = appendString(b, h.Values[0])
			continue
		}
		b = append(b, '[')
		for k, v := range h.Values {
			if k > 0 {
				b = append(b, ',')
			}
			b = appendString(b, v)
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

// appendString appends s as a JSON string. Header names and values are
// checked UTF-8 before they get here.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// MetaMembers is meta's members without the braces, to splice into an
// answer object after its "data" member; empty for no meta.
func MetaMembers(meta []byte) []byte {
	if len(meta) < 2 {
		return nil
	}
	return meta[1 : len(meta)-1]
}

// IsBinary says the data beside meta is the base64 of binary data.
func IsBinary(meta []byte) bool {
	return bytes.HasSuffix(meta, []byte(binaryMember+"}"))
}

// SharesMeta says a and b are one meta, the same bytes in memory:
// neighbours repeating their headers share one (wire.DecodePush), which
// is then sent and kept once.
func SharesMeta(a, b []byte) bool { return len(a) > 0 && len(a) == len(b) && &a[0] == &b[0] }

// DataEncoding is the dataEncoding member of meta: "base64", or "" for
// JSON data.
func DataEncoding(meta []byte) string {
	if IsBinary(meta) {
		return DataEncodingB64
	}
	return ""
}

// DataBytes is the bytes a message carries: its JSON text, or for binary
// data the bytes its base64 stands for. A payload conflict compares
// these.
func DataBytes(data, meta []byte) []byte {
	data = StoredData(data)
	if !IsBinary(meta) || len(data) < 2 {
		return data
	}
	out, err := base64.StdEncoding.AppendDecode(nil, data[1:len(data)-1])
	if err != nil { // not what the gateway stores: compare the text
		return data
	}
	return out
}

// WithMeta is a frame's Meta once message pos's meta m is added: it stays
// nil while no message has any.
func WithMeta(meta [][]byte, pos int, m []byte) [][]byte {
	if meta == nil && m == nil {
		return nil
	}
	if meta == nil {
		meta = make([][]byte, pos, pos+1)
	}
	return append(meta, m)
}

// JoinMeta is the meta of a message whose headers object (raw JSON as
// MetaHeadersRaw gives it; nil: none) and encoding are known apart, as a
// dead letter carries them.
func JoinMeta(headers []byte, binary bool) []byte {
	if len(headers) == 0 {
		return appendMeta(nil, nil, binary)
	}
	return appendMeta(nil, func(b []byte) []byte { return append(b, headers...) }, binary)
}

// MetaHeadersRaw is meta's headers object as stored; nil for none.
func MetaHeadersRaw(meta []byte) []byte {
	const prefix = `{"headers":`
	if !bytes.HasPrefix(meta, []byte(prefix)) {
		return nil
	}
	rest := meta[len(prefix):]
	rest = bytes.TrimSuffix(rest, []byte("}"))
	return bytes.TrimSuffix(rest, []byte(","+binaryMember))
}

// TraceID is the trace id of a W3C traceparent header among meta's
// ("00-<trace id>-<span id>-<flags>"), for log lines about the message;
// empty when it has none, or one not so formed.
func TraceID(meta []byte) string {
	// The gateway writes meta: a key is the only place this text can
	// stand (inside a string its quotes are escaped), and a well-formed
	// value has nothing to escape.
	const key = `"traceparent":"`
	i := bytes.Index(meta, []byte(key))
	if i < 0 {
		return ""
	}
	value, _, ok := bytes.Cut(meta[i+len(key):], []byte(`"`))
	if !ok {
		return ""
	}
	parts := strings.Split(string(value), "-")
	if len(parts) < 4 || len(parts[1]) != 32 || strings.Trim(parts[1], "0123456789abcdef") != "" {
		return ""
	}
	return parts[1]
}
