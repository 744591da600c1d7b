package gateway

import (
	"bytes"
	"regexp"
	"slices"
	"strconv"

	queengate "github.com/queengate/queengate"
)

// Every request body other than a push is an object decoded by
// decodeObject: the scanner's strict JSON (no \u0000, no unpaired
// surrogate), case-sensitive field names, each field at most once, and
// every problem a 400 in the protocol's words ("a string", "a whole
// number"), never Go's type names. Nothing is acted on before the whole
// body is decoded, so a 400 changes nothing.

// theBody is the where of a request's body, the outermost object.
const theBody = "the body"

// objectShape describes an object a request carries, for messages: its
// name as a sentence's subject ("a pop", "an ack item") and an example.
type objectShape struct {
	name    string
	example string
}

// objectField is one field an object takes and how its value is decoded.
// A field with a refusal is one the object never takes, though users
// reach for it: sending it is a 400 saying why.
type objectField struct {
	name    string
	decode  func(raw []byte) *queengate.Error
	refusal string
}

// decodeObject decodes raw, the object where ("the body", `"ack"`,
// "item 2"), calling each field's decode on its value in the body's
// order. An unknown, differently-cased or repeated field is a 400 naming
// it and the fields the object has; the errors of a nested object (where
// is not the body) name where.
func decodeObject(raw []byte, where string, shape objectShape, fields ...objectField) *queengate.Error {
	return decodeObjectAt(raw, func() string { return where }, shape, fields...)
}

// decodeObjectAt is decodeObject naming where only for an error: an
// ack's items are named by their index.
func decodeObjectAt(raw []byte, where func() string, shape objectShape, fields ...objectField) *queengate.Error {
	members, err := scanObject(raw, where)
	if err != nil {
		return badInput("%v; want %s", err, shape.example)
	}
	werr := decodeMembers(members, shape, fields)
	if werr != nil && where() != theBody {
		werr.Message = where() + ": " + werr.Message
	}
	return werr
}

// decodeMembers checks every field's name before decoding any value, so
// a misnamed field is reported as such whatever comes before it.
func decodeMembers(members []field, shape objectShape, fields []objectField) *queengate.Error {
	// The fields accepted are listed only in refusals: not built for the
	// objects that pass (an ack's every item).
	accepted := func() []string {
		var names []string
		for _, f := range fields {
			if f.refusal == "" {
				names = append(names, f.name)
			}
		}
		return names
	}
	index := make([]int, len(members))
	for i, m := range members {
		j := slices.IndexFunc(fields, func(f objectField) bool { return f.name == string(m.key) })
		switch {
		case j < 0:
			return badInput("%s", unknownField(excerpt(m.key), shape.name, accepted()))
		case fields[j].refusal != "":
			return badInput("%q: %s; %s has only %s", m.key, fields[j].refusal, shape.name, joinAnd(quoteAll(accepted())))
		case slices.ContainsFunc(members[:i], func(p field) bool { return bytes.Equal(p.key, m.key) }):
			return badInput("field %q is given twice: send it once (%s has %s)", m.key, shape.name, joinAnd(quoteAll(accepted())))
		}
		index[i] = j
	}
	for i, m := range members {
		if werr := fields[index[i]].decode(m.raw); werr != nil {
			return werr
		}
	}
	return nil
}

// stringInto decodes a string field into dst.
func stringInto(name string, dst *string) func([]byte) *queengate.Error {
	return func(raw []byte) *queengate.Error {
		s, ok := decodeString(raw)
		if !ok {
			return badInput("%q must be a string, not %s", name, describe(raw))
		}
		*dst = s
		return nil
	}
}

// nameInto decodes a field holding a queue, partition or group name.
func nameInto(name string, dst *string) func([]byte) *queengate.Error {
	return func(raw []byte) *queengate.Error {
		s, ok := decodeString(raw)
		if !ok || !queengate.ValidName(s) {
			return badInput("%q must be a name, a string of %s, not %s", name, queengate.NameRule, describe(raw))
		}
		*dst = s
		return nil
	}
}

// wholeNumberInto decodes a whole number from lo to hi into dst.
func wholeNumberInto[T int | int64](name string, lo, hi int64, dst *T) func([]byte) *queengate.Error {
	return func(raw []byte) *queengate.Error {
		n, werr := wholeNumber(name, raw)
		switch {
		case werr != nil && isIntegerLiteral(raw):
			// Beyond 64 bits: the field's own range says what to send.
			return badInput("%q is %s: from %d to %d", name, excerpt(raw), lo, hi)
		case werr != nil:
			return werr
		case n < lo || n > hi:
			return badInput("%q is %d: from %d to %d", name, n, lo, hi)
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

// wholeNumber decodes raw as a JSON number without fraction or exponent
// that fits in 64 bits.
func wholeNumber(name string, raw []byte) (int64, *queengate.Error) {
	if !isIntegerLiteral(raw) {
		return 0, badInput("%q must be a whole number, not %s", name, describe(raw))
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		side := "too large"
		if raw[0] == '-' {
			side = "too small"
		}
		return 0, badInput("%q is %s: %s", name, excerpt(raw), side)
	}
	return n, nil
}

// uuidText is a UUID as PostgreSQL prints it (a lease or timer id).
var uuidText = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// leaseIDInto decodes a leaseId: the UUID a pop answered.
func leaseIDInto(dst *string) func([]byte) *queengate.Error {
	return func(raw []byte) *queengate.Error {
		s, ok := decodeString(raw)
		if ok && s == "" {
			return badInput(`"leaseId" is empty: give the UUID a pop answered`)
		}
		if !ok || !uuidText.MatchString(s) {
			return badInput(`"leaseId" must be the UUID a pop answered (such as "5f0c2a9e-3b1d-4c6e-9a8f-0123456789ab"), not %s`, describe(raw))
		}
		*dst = s
		return nil
	}
}

// excerptBytes bounds how much of a bad value an error message echoes.
const excerptBytes = 40

// describe names a JSON value's kind in the protocol's words, with an
// excerpt of a string or number ("a string "abc"", "an array").
func describe(raw []byte) string {
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string " + excerpt(raw)
	case 't', 'f', 'n':
		return string(raw)
	}
	return "the JSON number " + excerpt(raw)
}

// excerpt is raw, cut to excerptBytes as clipTo cuts.
func excerpt(raw []byte) string { return clipTo(string(raw), excerptBytes) }

// scanArray splits raw, a value the scanner has validated, into its
// elements when it is an array.
func scanArray(raw []byte) (elems [][]byte, ok bool) {
	s := &scanner{b: raw}
	if s.peek() != '[' {
		return nil, false
	}
	s.array(func() {
		s.ws()
		start := s.i
		s.value()
		elems = append(elems, raw[start:s.i])
	})
	return elems, s.err == nil
}

// jsonBlank reports a body of JSON whitespace only: an optional body left
// out.
func jsonBlank(body []byte) bool {
	return len(bytes.Trim(body, " \t\r\n")) == 0
}
