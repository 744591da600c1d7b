package wire

import (
	"encoding/json"
	"strconv"
	"time"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/model"
)

// RawAnswer is an answer encoded already. Answers holding stored data are
// encoded by hand, because encoding/json compacts a json.RawMessage and
// data must come back byte for byte as it was pushed.
type RawAnswer []byte

// Encoded is an answer that encodes itself (RawAnswer, a pop's).
type Encoded interface {
	Encoded() []byte
}

// Encoded is r itself.
func (r RawAnswer) Encoded() []byte { return r }

// EncodeAnswer encodes an answer for the wire.
func EncodeAnswer(v any) ([]byte, error) {
	if e, ok := v.(Encoded); ok {
		return e.Encoded(), nil
	}
	return json.Marshal(v)
}

// appendStoredFields appends a StoredMessage's fields, without braces,
// its createdAt through times, and its meta as stored (model.AppendMeta:
// the headers in their stored order, spliced as they are).
func appendStoredFields(b []byte, m *queengate.StoredMessage, meta []byte, times *timeTexts) []byte {
	b = appendOffsetField(b, m.Offset)
	b = append(b, m.MessageID...)
	return appendStoredTail(b, m.TransactionID, m.CreatedAt, m.Data, meta, times)
}

// appendOffsetField appends a stored message's offset and opens its
// messageId, which the caller writes.
func appendOffsetField(b []byte, offset int64) []byte {
	b = append(b, `"offset":`...)
	b = strconv.AppendInt(b, offset, 10)
	return append(b, `,"messageId":"`...)
}

// appendStoredTail closes a stored message's messageId and appends its
// other fields: its meta's members (headers, dataEncoding) after data.
func appendStoredTail(b []byte, txnID string, createdAt time.Time, data, meta []byte, times *timeTexts) []byte {
	b = append(b, `","transactionId":`...)
	b = AppendJSONString(b, txnID)
	b = append(b, `,"createdAt":"`...)
	b = times.append(b, createdAt)
	b = append(b, `","data":`...)
	b = append(b, data...)
	if members := model.MetaMembers(meta); len(members) > 0 {
		b = append(append(b, ','), members...)
	}
	return b
}

// timeTexts writes the createdAt times of one answer's messages,
// formatting each only when it differs from the one before: the
// messages of one pushed frame share theirs, whose text is then copied
// from where it was written.
type timeTexts struct {
	last       time.Time
	start, end int // where last's text lies in the answer; end 0: none yet
}

// append appends t as RFC 3339 in UTC to b, the answer every earlier
// call appended to.
func (c *timeTexts) append(b []byte, t time.Time) []byte {
	if c.end > 0 && t.Equal(c.last) {
		return append(b, b[c.start:c.end]...)
	}
	c.last, c.start = t, len(b)
	b = t.UTC().AppendFormat(b, time.RFC3339Nano)
	c.end = len(b)
	return b
}

func appendPlace(b []byte, queue, partition string, pid int64) []byte {
	b = append(b, `"queue":`...)
	b = AppendJSONString(b, queue)
	b = append(b, `,"partition":`...)
	b = AppendJSONString(b, partition)
	b = append(b, `,"partitionId":`...)
	return strconv.AppendInt(b, pid, 10)
}

// EncodeRead encodes a read answer; meta[i] is message i's meta as
// stored (nil, or shorter than the messages, for none).
func EncodeRead(a *queengate.ReadAnswer, meta [][]byte) RawAnswer {
	metaOf := func(i int) []byte {
		if i < len(meta) {
			return meta[i]
		}
		return nil
	}
	size := 256
	for i := range a.Messages {
		size += 160 + len(a.Messages[i].TransactionID) + len(a.Messages[i].Data) + len(metaOf(i))
	}
	b := make([]byte, 0, size)
	b = append(b, '{')
	b = appendPlace(b, a.Queue, a.Partition, a.PartitionID)
	b = append(b, `,"messages":[`...)
	var times timeTexts
	for i := range a.Messages {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '{')
		b = appendStoredFields(b, &a.Messages[i], metaOf(i), &times)
		b = append(b, '}')
	}
	b = append(b, `],"next":`...)
	b = strconv.AppendInt(b, a.Next, 10)
	b = append(b, `,"firstOffset":`...)
	b = strconv.AppendInt(b, a.FirstOffset, 10)
	b = append(b, `,"lastOffset":`...)
	b = strconv.AppendInt(b, a.LastOffset, 10)
	if a.Purged {
		b = append(b, `,"purged":true`...)
	}
	return append(b, '}')
}

// EncodeMessage encodes a message answer, its meta as stored (nil for
// none).
func EncodeMessage(a *queengate.MessageAnswer, meta []byte) RawAnswer {
	b := make([]byte, 0, 256+len(a.TransactionID)+len(a.Data)+len(meta))
	b = append(b, '{')
	b = appendPlace(b, a.Queue, a.Partition, a.PartitionID)
	b = append(b, ',')
	b = appendStoredFields(b, &a.StoredMessage, meta, &timeTexts{})
	return append(b, '}')
}
