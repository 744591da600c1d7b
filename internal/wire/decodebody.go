package wire

import (
	"bytes"
	"regexp"
	"slices"
	"strconv"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/internal/jsonscan"
)

// Every request body other than a push is an object decoded by
// DecodeObject: the scanner's strict JSON (no \u0000, no unpaired
// surrogate), case-sensitive field names, each field at most once, and
// every problem a 400 in the protocol's words ("a string", "a whole
// number"), never Go's type names. Nothing is acted on before the whole
// body is decoded, so a 400 changes nothing.

// TheBody is the where of a request's body, the outermost object.
const TheBody = "the body"

// Shape describes an object a request carries, for messages: its
// name as a sentence's subject ("a pop", "an ack item") and an example.
type Shape struct {
	Name    string
	Example string
}

// Field is one field an object takes and how its value is decoded.
// A field with a refusal is one the object never takes, though users
// reach for it: sending it is a 400 saying why.
type Field struct {
	Name    string
	Decode  func(raw []byte) *queengate.Error
	Refusal string
}

// DecodeObject decodes raw, the object where ("the body", `"ack"`,
// "item 2"), calling each field's decode on its value in the body's
// order. An unknown, differently-cased or repeated field is a 400 naming
// it and the fields the object has; the errors of a nested object (where
// is not the body) name where.
func DecodeObject(raw []byte, where string, shape Shape, fields ...Field) *queengate.Error {
	return DecodeObjectAt(raw, func() string { return where }, shape, fields...)
}

// DecodeObjectAt is DecodeObject naming where only for an error: an
// ack's items are named by their index.
func DecodeObjectAt(raw []byte, where func() string, shape Shape, fields ...Field) *queengate.Error {
	members, err := ScanObject(raw, where)
	if err != nil {
		return BadInput("%v; want %s", err, shape.Example)
	}
	werr := decodeMembers(members, shape, fields)
	if werr != nil && where() != TheBody {
		werr.Text = where() + ": " + werr.Text
	}
	return werr
}

// decodeMembers checks every field's name before decoding any value, so
// a misnamed field is reported as such whatever comes before it.
func decodeMembers(members []Member, shape Shape, fields []Field) *queengate.Error {
	// The fields accepted are listed only in refusals: not built for the
	// objects that pass (an ack's every item).
	accepted := func() []string {
		var names []string
		for _, f := range fields {
			if f.Refusal == "" {
				names = append(names, f.Name)
			}
		}
		return names
	}
	index := make([]int, len(members))
	for i, m := range members {
		j := slices.IndexFunc(fields, func(f Field) bool { return f.Name == string(m.Key) })
		switch {
		case j < 0:
			return BadInput("%s", unknownField(Excerpt(m.Key), shape.Name, accepted()))
		case fields[j].Refusal != "":
			return BadInput("%q: %s; %s has only %s", m.Key, fields[j].Refusal, shape.Name, JoinAnd(QuoteAll(accepted())))
		case slices.ContainsFunc(members[:i], func(p Member) bool { return bytes.Equal(p.Key, m.Key) }):
			return BadInput("field %q is given twice: send it once (%s has %s)", m.Key, shape.Name, JoinAnd(QuoteAll(accepted())))
		}
		index[i] = j
	}
	for i, m := range members {
		if werr := fields[index[i]].Decode(m.Raw); werr != nil {
			return werr
		}
	}
	return nil
}

// StringInto decodes a string field into dst.
func StringInto(name string, dst *string) func([]byte) *queengate.Error {
	return func(raw []byte) *queengate.Error {
		s, ok := DecodeString(raw)
		if !ok {
			return BadInput("%q must be a string, not %s", name, Describe(raw))
		}
		*dst = s
		return nil
	}
}

// NameInto decodes a field holding a queue, partition or group name.
func NameInto(name string, dst *string) func([]byte) *queengate.Error {
	return func(raw []byte) *queengate.Error {
		s, ok := DecodeString(raw)
		if !ok || !queengate.ValidName(s) {
			return BadInput("%q must be a name, a string of %s, not %s", name, queengate.NameRule, Describe(raw))
		}
		*dst = s
		return nil
	}
}

// WholeNumberInto decodes a whole number from lo to hi into dst.
func WholeNumberInto[T int | int64](name string, lo, hi int64, dst *T) func([]byte) *queengate.Error {
	return func(raw []byte) *queengate.Error {
		n, werr := WholeNumber(name, raw)
		switch {
		case werr != nil && isIntegerLiteral(raw):
			// Beyond 64 bits: the field's own range says what to send.
			return BadInput("%q is %s: from %d to %d", name, Excerpt(raw), lo, hi)
		case werr != nil:
			return werr
		case n < lo || n > hi:
			return BadInput("%q is %d: from %d to %d", name, n, lo, hi)
		}
		*dst = T(n)
		return nil
	}
}

// isIntegerLiteral reports a JSON number with no fraction or exponent,
// -?(0|[1-9][0-9]*), checked by hand: a regexp was a tenth of decoding
// an ack of 100 offsets.
func isIntegerLiteral(raw []byte) bool {
	digits := bytes.TrimPrefix(raw, []byte("-"))
	if len(digits) == 0 || len(digits) > 1 && digits[0] == '0' {
		return false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// WholeNumber decodes raw as a JSON number without fraction or exponent
// that fits in 64 bits.
func WholeNumber(name string, raw []byte) (int64, *queengate.Error) {
	if !isIntegerLiteral(raw) {
		return 0, BadInput("%q must be a whole number, not %s", name, Describe(raw))
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		side := "too large"
		if raw[0] == '-' {
			side = "too small"
		}
		return 0, BadInput("%q is %s: %s", name, Excerpt(raw), side)
	}
	return n, nil
}

// UUIDText is a UUID as PostgreSQL prints it (a lease or timer id).
var UUIDText = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// LeaseIDInto decodes a leaseId: the UUID a pop answered.
func LeaseIDInto(dst *string) func([]byte) *queengate.Error {
	return func(raw []byte) *queengate.Error {
		s, ok := DecodeString(raw)
		if ok && s == "" {
			return BadInput(`"leaseId" is empty: give the UUID a pop answered`)
		}
		if !ok || !UUIDText.MatchString(s) {
			return BadInput(`"leaseId" must be the UUID a pop answered (such as "5f0c2a9e-3b1d-4c6e-9a8f-0123456789ab"), not %s`, Describe(raw))
		}
		*dst = s
		return nil
	}
}

// ExcerptBytes bounds how much of a bad value an error message echoes.
const ExcerptBytes = 40

// Describe names a JSON value's kind in the protocol's words, with an
// excerpt of a string or number ("a string "abc"", "an array").
func Describe(raw []byte) string {
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string " + Excerpt(raw)
	case 't', 'f', 'n':
		return string(raw)
	}
	return "the JSON number " + Excerpt(raw)
}

// Excerpt is raw, cut to ExcerptBytes as ClipTo cuts.
func Excerpt(raw []byte) string { return ClipTo(string(raw), ExcerptBytes) }

// ScanArray splits raw, a value the scanner has validated, into its
// elements when it is an array.
func ScanArray(raw []byte) (elems [][]byte, ok bool) {
	s := &jsonscan.Scanner{B: raw}
	if s.Peek() != '[' {
		return nil, false
	}
	s.Array(func() {
		s.WS()
		start := s.I
		s.Value()
		elems = append(elems, raw[start:s.I])
	})
	return elems, s.Err == nil
}

// Blank reports a body of JSON whitespace only: an optional body left
// out.
func Blank(body []byte) bool {
	return len(bytes.Trim(body, " \t\r\n")) == 0
}
