package pgwire

import "github.com/queengate/queengate/model"

// AckArrays are consumer_ack's item arrays, encoded as the push's are
// (wire.go): pgx's reflection on them was a tenth of an ack's CPU.
// Each item has an offset or a transactionId's hash (NULL for the other)
// and an error when it failed (NULL when completed).
func AckArrays(items []model.Settlement) (offsets, hashes, completed, errs EncodedArray) {
	errBytes := 0
	for i := range items {
		errBytes += len(items[i].Error)
	}
	o := NewArrayBuilder(OIDInt8, len(items), 8*len(items))
	h := NewArrayBuilder(OIDUUID, len(items), 16*len(items))
	c := NewArrayBuilder(OIDBool, len(items), len(items))
	e := NewArrayBuilder(OIDText, len(items), errBytes)
	for i := range items {
		it := &items[i]
		if it.Offset >= 0 {
			o.AppendInt64(it.Offset)
			h.AppendNull()
		} else {
			hash := model.HashTxnID(it.TxnID)
			o.AppendNull()
			h.AppendBytes(hash[:])
		}
		c.AppendBool(it.Completed)
		if it.Completed {
			e.AppendNull()
		} else {
			e.AppendString(it.Error)
		}
	}
	return o.Encoded(), h.Encoded(), c.Encoded(), e.Encoded()
}

// AckDelays is consumer_ack's p_delays: each failed item's delay when it
// asks for one (NULL for the others: the queue's), or nil (NULL) when
// none does, the usual ack.
func AckDelays(items []model.Settlement) any {
	var d *ArrayBuilder
	for i := range items {
		if items[i].DelayMs > 0 && !items[i].Completed {
			d = NewArrayBuilder(OIDInt8, len(items), 8*len(items))
			break
		}
	}
	if d == nil {
		return nil
	}
	for i := range items {
		if it := &items[i]; it.DelayMs > 0 && !it.Completed {
			d.AppendInt64(it.DelayMs)
		} else {
			d.AppendNull()
		}
	}
	return d.Encoded()
}
