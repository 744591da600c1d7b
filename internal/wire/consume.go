package wire

import (
	"strconv"
	"time"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/model"
)

// EncodePop writes a pop's answer by hand: data comes back as pushed;
// acked is the carried ack's answer, encoded.
func EncodePop(queue, group string, r *model.PopResult, acked []byte) RawAnswer {
	return EncodePopLeases(queue, group, r, nil, "ack", acked)
}

// EncodePopLeases is EncodePop for a pop over several partitions: r is
// the first partition's, more the further ones' (the answer's "more");
// acked, when not nil, is the answer of the carried acks, under ackField
// ("ack", or "acks" for a list).
func EncodePopLeases(queue, group string, r *model.PopResult, more []model.PopResult, ackField string, acked []byte) RawAnswer {
	size := 512 + len(acked) + 512*len(more) + popMessagesSize(r.Messages)
	for i := range more {
		size += popMessagesSize(more[i].Messages)
	}
	b := append(make([]byte, 0, size), `{"queue":`...)
	b = AppendJSONString(b, queue)
	b = append(b, `,"group":`...)
	b = AppendJSONString(b, group)
	if r.LeaseID != "" {
		b = append(b, ',')
		b = appendLease(b, r)
	}
	if r.DeadLettered > 0 {
		b = append(b, `,"deadLettered":`...)
		b = strconv.AppendInt(b, int64(r.DeadLettered), 10)
	}
	if acked != nil {
		b = append(b, `,"`...)
		b = append(b, ackField...)
		b = append(b, `":`...)
		b = append(b, acked...)
	}
	var times timeTexts
	b = appendDeliveries(b, r.Messages, &times)
	if len(more) > 0 {
		b = append(b, `,"more":[`...)
		for i := range more {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, '{')
			b = appendLease(b, &more[i])
			b = appendDeliveries(b, more[i].Messages, &times)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

// popMessagesSize is about what messages take in a pop's answer.
func popMessagesSize(ms []model.LeasedMessage) int {
	size := 0
	for i := range ms {
		m := &ms[i]
		size += 192 + len(m.TxnID) + len(m.Data) + len(m.Meta) + len(m.LastError)
	}
	return size
}

// appendLease appends a pop's partition and lease fields.
func appendLease(b []byte, r *model.PopResult) []byte {
	b = append(b, `"partition":`...)
	b = AppendJSONString(b, r.Partition)
	b = append(b, `,"partitionId":`...)
	b = strconv.AppendInt(b, r.PartitionID, 10)
	b = append(b, `,"leaseId":"`...)
	b = append(b, r.LeaseID...)
	b = append(b, `","leaseUntil":"`...)
	b = r.LeaseUntil.UTC().AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

// appendDeliveries appends a pop's "messages" field, a comma first,
// their createdAt through times: nothing is allocated per message.
func appendDeliveries(b []byte, ms []model.LeasedMessage, times *timeTexts) []byte {
	b = append(b, `,"messages":[`...)
	for i := range ms {
		m := &ms[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '{')
		b = appendOffsetField(b, m.Offset)
		b = model.AppendMessageID(b, m.PartitionID, m.Offset)
		b = appendStoredTail(b, m.TxnID, m.CreatedAt, m.Data, m.Meta, times)
		b = append(b, `,"attempts":`...)
		b = strconv.AppendInt(b, int64(m.Attempts), 10)
		if m.LastError != "" {
			b = append(b, `,"lastError":`...)
			b = AppendJSONString(b, m.LastError)
		}
		b = append(b, '}')
	}
	return append(b, ']')
}

// AppendAckAnswer appends an ack's answer, without reflection: a batch's
// answer repeats each of its items. It is what encoding/json writes but
// for the strings' escapes (AppendJSONString's), so it decodes to the
// same answer and takes no more bytes than MarshalledStringBound counts.
func AppendAckAnswer(b []byte, a *queengate.AckAnswer) []byte {
	if b == nil {
		size := 96
		for i := range a.Items {
			size += 64 + len(a.Items[i].TransactionID)
		}
		b = make([]byte, 0, size)
	}
	b = append(b, `{"items":[`...)
	for i := range a.Items {
		it := &a.Items[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"index":`...)
		b = strconv.AppendInt(b, int64(it.Index), 10)
		if it.TransactionID != "" {
			b = append(b, `,"transactionId":`...)
			b = AppendJSONString(b, it.TransactionID)
		}
		if it.Offset != nil {
			b = append(b, `,"offset":`...)
			b = strconv.AppendInt(b, *it.Offset, 10)
		}
		b = append(b, `,"result":`...)
		b = AppendJSONString(b, it.Result)
		b = append(b, '}')
	}
	b = append(b, `],"nextOffset":`...)
	b = strconv.AppendInt(b, a.NextOffset, 10)
	b = append(b, `,"leaseEnded":`...)
	b = strconv.AppendBool(b, a.LeaseEnded)
	if a.DeadLettered != 0 {
		b = append(b, `,"deadLettered":`...)
		b = strconv.AppendInt(b, int64(a.DeadLettered), 10)
	}
	return append(b, '}')
}
