package pgwire

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/queengate/queengate/model"
)

// The push path sends thousands of array elements per statement (an
// ack, one per item). pgx's
// generic array codec boxes every element into an interface and grows its
// buffer as it goes; for a 1000-message frame that was ~0.7 ms of client CPU
// per push. So the push arrays are built directly in PostgreSQL's binary
// array format, in one buffer, and handed to pgx as already encoded; hash
// arrays read by hydration are parsed the same way.

const (
	OIDText      = 25
	OIDJSON      = 114
	OIDUUID      = 2950
	OIDInt8      = 20
	OIDBool      = 16
	oidInt8Array = pgtype.Int8ArrayOID
	oidBoolArray = pgtype.BoolArrayOID
	oidTextArray = pgtype.TextArrayOID
	oidJSONArray = pgtype.JSONArrayOID
	oidUUIDArray = pgtype.UUIDArrayOID
)

// EncodedArray is a one-dimensional array already in the binary format. It
// is a struct, not a []byte, so that a connection without the codecs of
// RegisterCodecs fails to encode it instead of sending it as something else.
type EncodedArray struct{ b []byte }

// arrayHeader starts a one-dimensional, NULL-free binary array of n elements.
func arrayHeader(buf []byte, elemOID uint32, n int) []byte {
	buf = binary.BigEndian.AppendUint32(buf, 1) // dimensions
	buf = binary.BigEndian.AppendUint32(buf, 0) // has nulls
	buf = binary.BigEndian.AppendUint32(buf, elemOID)
	buf = binary.BigEndian.AppendUint32(buf, uint32(n))
	return binary.BigEndian.AppendUint32(buf, 1) // lower bound
}

// ArrayBuilder appends elements after an arrayHeader.
type ArrayBuilder struct{ buf []byte }

func NewArrayBuilder(elemOID uint32, n, payload int) *ArrayBuilder {
	b := &ArrayBuilder{buf: make([]byte, 0, 20+4*n+payload)}
	b.buf = arrayHeader(b.buf, elemOID, n)
	return b
}

func (b *ArrayBuilder) AppendString(s string) {
	b.buf = binary.BigEndian.AppendUint32(b.buf, uint32(len(s)))
	b.buf = append(b.buf, s...)
}

func (b *ArrayBuilder) AppendBytes(p []byte) {
	b.buf = binary.BigEndian.AppendUint32(b.buf, uint32(len(p)))
	b.buf = append(b.buf, p...)
}

// AppendNull appends a NULL element, marking the array as holding one.
func (b *ArrayBuilder) AppendNull() {
	binary.BigEndian.PutUint32(b.buf[4:], 1) // has nulls
	b.buf = binary.BigEndian.AppendUint32(b.buf, 0xFFFFFFFF)
}

func (b *ArrayBuilder) AppendInt64(n int64) {
	b.buf = binary.BigEndian.AppendUint32(b.buf, 8)
	b.buf = binary.BigEndian.AppendUint64(b.buf, uint64(n))
}

func (b *ArrayBuilder) AppendBool(v bool) {
	b.buf = binary.BigEndian.AppendUint32(b.buf, 1)
	if v {
		b.buf = append(b.buf, 1)
	} else {
		b.buf = append(b.buf, 0)
	}
}

func (b *ArrayBuilder) Encoded() EncodedArray { return EncodedArray{b.buf} }

// decodeHashArray parses a binary uuid[] (one dimension, no NULLs).
func decodeHashArray(src []byte, dst []model.Hash) ([]model.Hash, error) {
	if len(src) < 12 {
		return nil, errors.New("pgstore: short uuid[]")
	}
	ndim := binary.BigEndian.Uint32(src)
	if ndim == 0 {
		return dst[:0], nil
	}
	if ndim != 1 || len(src) < 20 || binary.BigEndian.Uint32(src[8:]) != OIDUUID {
		return nil, fmt.Errorf("pgstore: expected a one-dimensional uuid[], got %d dimensions", ndim)
	}
	n := int(binary.BigEndian.Uint32(src[12:]))
	body := src[20:]
	if len(body) != n*20 {
		return nil, fmt.Errorf("pgstore: uuid[] of %d elements has %d bytes", n, len(body))
	}
	if cap(dst) < n {
		dst = make([]model.Hash, n)
	}
	dst = dst[:n]
	for i := range n {
		el := body[i*20:]
		if binary.BigEndian.Uint32(el) != 16 {
			return nil, errors.New("pgstore: uuid[] holds a NULL or a malformed element")
		}
		copy(dst[i][:], el[4:20])
	}
	return dst, nil
}

// arrayElements splits a binary one-dimensional array of elemOID into its
// elements, nil for a NULL one; an array of no dimensions has none.
func arrayElements(src []byte, elemOID uint32) ([][]byte, error) {
	n, body, err := arrayBody(src, elemOID)
	if err != nil {
		return nil, err
	}
	elems := make([][]byte, n)
	for i := range elems {
		if elems[i], body, err = nextElement(body); err != nil {
			return nil, err
		}
	}
	if len(body) != 0 {
		return nil, errors.New("pgstore: array longer than its length")
	}
	return elems, nil
}

// AckOffsets and AckResults are consumer_ack's offs (bigint[], NULL for
// an unresolved item) and results (text[]), read without pgx's
// reflection: they have an element per item of every ack.
type (
	AckOffsets []*int64
	AckResults []string
)

// scanElements reads src, a binary array of elemOID or NULL, into *dst,
// each element through read (given nil for a NULL element).
func scanElements[T any](src []byte, elemOID uint32, dst *[]T, read func(el []byte) (T, error)) error {
	*dst = nil
	if src == nil {
		return nil
	}
	elems, err := arrayElements(src, elemOID)
	if err != nil {
		return err
	}
	*dst = make([]T, len(elems))
	for i, el := range elems {
		if (*dst)[i], err = read(el); err != nil {
			return err
		}
	}
	return nil
}

type ackOffsetsScanPlan struct{}

func (ackOffsetsScanPlan) Scan(src []byte, target any) error {
	return scanElements(src, OIDInt8, (*[]*int64)(target.(*AckOffsets)), func(el []byte) (*int64, error) {
		switch {
		case el == nil:
			return nil, nil
		case len(el) != 8:
			return nil, errors.New("pgstore: a bigint[] element not of 8 bytes")
		}
		n := int64(binary.BigEndian.Uint64(el))
		return &n, nil
	})
}

type ackResultsScanPlan struct{}

func (ackResultsScanPlan) Scan(src []byte, target any) error {
	return scanElements(src, OIDText, (*[]string)(target.(*AckResults)), func(el []byte) (string, error) {
		if el == nil {
			return "", errors.New("pgstore: a NULL result")
		}
		return internedResult(el), nil
	})
}

// internedResult is a result's name, the usual ones not copied per item.
func internedResult(b []byte) string {
	for _, known := range []string{model.AckAcked, model.AckAlready} {
		if string(b) == known {
			return known
		}
	}
	return string(b)
}

// arrayCodec wraps pgx's codec for an array type: EncodedArray values are
// sent as they are, and *[]Hash (uuid[]), *AckOffsets, *AckResults,
// *TextArray and *BytesArray targets are parsed directly.
// Everything else goes to the wrapped codec.
type arrayCodec struct{ pgtype.Codec }

type encodedArrayPlan struct{}

func (encodedArrayPlan) Encode(value any, buf []byte) ([]byte, error) {
	return append(buf, value.(EncodedArray).b...), nil
}

type hashArrayScanPlan struct{}

func (hashArrayScanPlan) Scan(src []byte, target any) error {
	dst := target.(*[]model.Hash)
	if src == nil {
		*dst = nil
		return nil
	}
	hashes, err := decodeHashArray(src, nil)
	if err != nil {
		return err
	}
	*dst = hashes
	return nil
}

func (c arrayCodec) PlanEncode(m *pgtype.Map, oid uint32, format int16, value any) pgtype.EncodePlan {
	if _, ok := value.(EncodedArray); ok && format == pgtype.BinaryFormatCode {
		return encodedArrayPlan{}
	}
	return c.Codec.PlanEncode(m, oid, format, value)
}

func (c arrayCodec) PlanScan(m *pgtype.Map, oid uint32, format int16, target any) pgtype.ScanPlan {
	if format == pgtype.BinaryFormatCode {
		switch target.(type) {
		case *[]model.Hash:
			if oid == oidUUIDArray {
				return hashArrayScanPlan{}
			}
		case *AckOffsets:
			if oid == oidInt8Array {
				return ackOffsetsScanPlan{}
			}
		case *AckResults:
			if oid == oidTextArray {
				return ackResultsScanPlan{}
			}
		case *TextArray:
			if oid == oidTextArray {
				return textArrayScanPlan{}
			}
		case *BytesArray:
			if oid == oidTextArray {
				return bytesArrayScanPlan{}
			}
		}
	}
	return c.Codec.PlanScan(m, oid, format, target)
}

// RegisterCodecs installs arrayCodec on a connection's type map. Open does
// this for every pooled connection.
func RegisterCodecs(_ context.Context, conn *pgx.Conn) error {
	return registerArrayCodecs(conn.TypeMap())
}

// registerArrayCodecs wraps m's array codecs in arrayCodec.
func registerArrayCodecs(m *pgtype.Map) error {
	for _, oid := range []uint32{oidTextArray, oidJSONArray, oidUUIDArray, oidInt8Array, oidBoolArray} {
		t, ok := m.TypeForOID(oid)
		if !ok {
			return fmt.Errorf("pgstore: type %d unknown to pgx", oid)
		}
		if _, done := t.Codec.(arrayCodec); done {
			continue
		}
		m.RegisterType(&pgtype.Type{Name: t.Name, OID: t.OID, Codec: arrayCodec{t.Codec}})
	}
	return nil
}
