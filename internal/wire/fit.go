package wire

import (
	"encoding/json"
	"fmt"

	queengate "github.com/queengate/queengate"
)

// EncodedLen is the length of v's JSON encoding.
func EncodedLen(v any) int {
	b, err := json.Marshal(v)
	if err != nil {
		return 0 // the whole answer's encoding reports it
	}
	return len(b)
}

// Fitting is how many of items, from the first, encode in a JSON array
// within budget bytes, and the bytes they take.
func Fitting[T any](items []T, budget int) (n, used int) {
	used = 2 // the brackets
	for i := range items {
		size := EncodedLen(items[i]) + 1 // and a comma
		if used+size > budget {
			return i, used
		}
		used += size
	}
	return len(items), used
}

// TooLargeToAnswer refuses an answer of one stored message that does not
// fit budget bytes: it was stored under a larger max payload, or before
// its kind was held to the limit (the cause is not known here).
func TooLargeToAnswer(what string, size, budget int) *queengate.Error {
	return &queengate.Error{Code: queengate.CodeTooLarge, Text: fmt.Sprintf(
		"%s takes %d bytes, more than one answer carries on this gateway's NATS connection (%d bytes)",
		what, size, budget)}
}
