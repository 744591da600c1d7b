package gateway

// DecodeServing reads a heartbeat's serving set, for tests that watch the
// fleet from outside.
var DecodeServing = func(s string, n int) ([]bool, error) {
	b, err := decodeBitset(s, n)
	if err != nil {
		return nil, err
	}
	out := make([]bool, n)
	for k := range out {
		out[k] = b.has(k)
	}
	return out, nil
}
