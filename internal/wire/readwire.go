package wire

import (
	"encoding/json"
	"strconv"
	"time"

	queengate "github.com/queengate/queengate"
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

// appendStoredFields appends a StoredMessage's fields, without braces.
func appendStoredFields(b []byte, m *queengate.StoredMessage) []byte {
	b = append(b, `"offset":`...)
	b = strconv.AppendInt(b, m.Offset, 10)
	b = append(b, `,"messageId":"`...)
	b = append(b, m.MessageID...)
	b = append(b, `","transactionId":`...)
	b = AppendJSONString(b, m.TransactionID)
	b = append(b, `,"createdAt":"`...)
	b = m.CreatedAt.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","data":`...)
	return append(b, m.Data...)
}

func appendPlace(b []byte, queue, partition string, pid int64) []byte {
	b = append(b, `"queue":`...)
	b = AppendJSONString(b, queue)
	b = append(b, `,"partition":`...)
	b = AppendJSONString(b, partition)
	b = append(b, `,"partitionId":`...)
	return strconv.AppendInt(b, pid, 10)
}

// EncodeRead encodes a read answer.
func EncodeRead(a *queengate.ReadAnswer) RawAnswer {
	size := 256
	for i := range a.Messages {
		size += 160 + len(a.Messages[i].TransactionID) + len(a.Messages[i].Data)
	}
	b := make([]byte, 0, size)
	b = append(b, '{')
	b = appendPlace(b, a.Queue, a.Partition, a.PartitionID)
	b = append(b, `,"messages":[`...)
	for i := range a.Messages {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '{')
		b = appendStoredFields(b, &a.Messages[i])
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

// EncodeMessage encodes a message answer.
func EncodeMessage(a *queengate.MessageAnswer) RawAnswer {
	b := make([]byte, 0, 256+len(a.TransactionID)+len(a.Data))
	b = append(b, '{')
	b = appendPlace(b, a.Queue, a.Partition, a.PartitionID)
	b = append(b, ',')
	b = appendStoredFields(b, &a.StoredMessage)
	return append(b, '}')
}
