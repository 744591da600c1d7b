package model

import (
	"encoding/binary"

	"github.com/zeebo/xxh3"
)

// Hash is the identity under which a transactionId is deduplicated: the
// 16-byte xxh3_128 of its bytes, high 64 bits then low 64 bits, big-endian.
// The broker and SQL compare these same 16 bytes, so a collision is by
// definition a duplicate.
type Hash = [16]byte

// HashTxnID computes the Hash of a transactionId. It is the one place the
// identity is defined.
func HashTxnID(txnID string) Hash {
	sum := xxh3.HashString128(txnID)
	var h Hash
	binary.BigEndian.PutUint64(h[:8], sum.Hi)
	binary.BigEndian.PutUint64(h[8:], sum.Lo)
	return h
}

// HashData is the hash a payload conflict compares: the xxh3_128 of the
// bytes a message carries (DataBytes: its JSON text as sent, nil is
// null, or the bytes of binary data). Headers take no part: a retry with
// another trace context is the same message.
func HashData(data, meta []byte) Hash {
	sum := xxh3.Hash128(DataBytes(data, meta))
	var h Hash
	binary.BigEndian.PutUint64(h[:8], sum.Hi)
	binary.BigEndian.PutUint64(h[8:], sum.Lo)
	return h
}

var jsonNull = []byte("null")

// HashEachData is HashData of every message's data, in order; meta is
// nil when no message has any.
func HashEachData(data, meta [][]byte) []Hash {
	out := make([]Hash, len(data))
	for i, d := range data {
		var m []byte
		if meta != nil {
			m = meta[i]
		}
		out[i] = HashData(d, m)
	}
	return out
}
