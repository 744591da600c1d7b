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

// HashData is the hash a payload conflict compares: the xxh3_128 of a
// message's data as sent (nil is null), byte for byte.
func HashData(data []byte) Hash {
	if data == nil {
		data = jsonNull
	}
	sum := xxh3.Hash128(data)
	var h Hash
	binary.BigEndian.PutUint64(h[:8], sum.Hi)
	binary.BigEndian.PutUint64(h[8:], sum.Lo)
	return h
}

var jsonNull = []byte("null")

// HashEachData is HashData of every message's data, in order.
func HashEachData(data [][]byte) []Hash {
	out := make([]Hash, len(data))
	for i, d := range data {
		out[i] = HashData(d)
	}
	return out
}
