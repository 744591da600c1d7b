package pgwire

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// A pop's answer carries its messages' transactionIds and data as text[]
// (data::text[]): pgx's codecs make a string or a []byte of every
// element, four allocations per message delivered with the rest. These
// targets copy the array once as received and hand out its elements as
// slices of that one copy: an answer's allocations do not grow with its
// messages.

// TextArray is a text[] read whole: its elements are substrings of one
// string, the array as received.
type TextArray struct {
	all   string
	spans []span
}

// BytesArray is a text[] read whole for its bytes (a message's data as
// stored): its elements are slices of one buffer, the array as received.
type BytesArray struct {
	all   []byte
	spans []span
}

// span is where an element lies in its array; start -1: NULL.
type span struct{ start, end int }

// Len is the number of elements; 0 for a NULL array.
func (a *TextArray) Len() int { return len(a.spans) }

// At is element i; ok false for a NULL.
func (a *TextArray) At(i int) (s string, ok bool) {
	sp := a.spans[i]
	if sp.start < 0 {
		return "", false
	}
	return a.all[sp.start:sp.end], true
}

// Len is the number of elements; 0 for a NULL array.
func (a *BytesArray) Len() int { return len(a.spans) }

// At is element i, nil for a NULL. Its capacity ends with it: an append
// to it copies, never overwriting the next element.
func (a *BytesArray) At(i int) []byte {
	sp := a.spans[i]
	if sp.start < 0 {
		return nil
	}
	return a.all[sp.start:sp.end:sp.end]
}

type textArrayScanPlan struct{}

func (textArrayScanPlan) Scan(src []byte, target any) error {
	a := target.(*TextArray)
	spans, err := arraySpans(src, OIDText)
	if err != nil {
		return err
	}
	*a = TextArray{spans: spans}
	if spans != nil {
		a.all = string(src)
	}
	return nil
}

type bytesArrayScanPlan struct{}

func (bytesArrayScanPlan) Scan(src []byte, target any) error {
	a := target.(*BytesArray)
	spans, err := arraySpans(src, OIDText)
	if err != nil {
		return err
	}
	*a = BytesArray{spans: spans}
	if spans != nil {
		a.all = append([]byte(nil), src...)
	}
	return nil
}

// arraySpans is where each element of src, a binary one-dimensional
// array of elemOID, lies in src; nil for a NULL array or one of no
// dimensions.
func arraySpans(src []byte, elemOID uint32) ([]span, error) {
	if src == nil {
		return nil, nil
	}
	n, body, err := arrayBody(src, elemOID)
	if err != nil {
		return nil, err
	}
	spans := make([]span, n)
	at := len(src) - len(body)
	for i := range spans {
		el, rest, err := nextElement(body)
		if err != nil {
			return nil, err
		}
		if el == nil {
			spans[i] = span{-1, -1}
		} else {
			spans[i] = span{at + 4, at + 4 + len(el)}
		}
		at += len(body) - len(rest)
		body = rest
	}
	if len(body) != 0 {
		return nil, errors.New("pgstore: array longer than its length")
	}
	return spans, nil
}

// arrayBody checks that src is a binary one-dimensional array of elemOID
// and returns its number of elements and the bytes that hold them; an
// array of no dimensions has none.
func arrayBody(src []byte, elemOID uint32) (n int, body []byte, err error) {
	if len(src) < 12 {
		return 0, nil, errors.New("pgstore: short array")
	}
	if ndim := binary.BigEndian.Uint32(src); ndim == 0 {
		if len(src) != 12 {
			return 0, nil, errors.New("pgstore: an array of no dimensions followed by more")
		}
		return 0, nil, nil
	} else if ndim != 1 || len(src) < 20 || binary.BigEndian.Uint32(src[8:]) != elemOID {
		return 0, nil, fmt.Errorf("pgstore: expected a one-dimensional array of type %d", elemOID)
	}
	n = int(binary.BigEndian.Uint32(src[12:]))
	body = src[20:]
	if n > len(body)/4 { // each element takes its 4-byte length at least
		return 0, nil, errors.New("pgstore: array shorter than its length")
	}
	return n, body, nil
}

// nextElement splits body's first element off the rest: nil for a NULL,
// not nil (though empty) for any other.
func nextElement(body []byte) (el, rest []byte, err error) {
	if len(body) < 4 {
		return nil, nil, errors.New("pgstore: array shorter than its length")
	}
	size := int32(binary.BigEndian.Uint32(body))
	body = body[4:]
	switch {
	case size == -1:
		return nil, body, nil
	case size < 0:
		return nil, nil, fmt.Errorf("pgstore: array element of length %d", size)
	case int(size) > len(body):
		return nil, nil, errors.New("pgstore: array element past its end")
	}
	return body[:size:size], body[size:], nil
}
