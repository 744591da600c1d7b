// Package wiretest holds references the fuzz targets of internal/wire and
// gateway check the scanner against: the protocol's rules written again,
// apart from the scanner, so that a fault in one is not in both.
package wiretest

import "strconv"

// HasUnstorableEscape reports a \u0000 escape or a surrogate escape not
// part of a high-low pair anywhere in valid JSON (backslashes occur only
// inside strings there).
func HasUnstorableEscape(body []byte) bool {
	for i := 0; i < len(body); i++ {
		if body[i] != '\\' {
			continue
		}
		i++ // the escaped character
		if i >= len(body) || body[i] != 'u' || i+4 >= len(body) {
			continue
		}
		v, err := strconv.ParseUint(string(body[i+1:i+5]), 16, 16)
		if err != nil {
			continue
		}
		switch {
		case v == 0:
			return true
		case v >= 0xdc00 && v <= 0xdfff:
			return true // a low surrogate not consumed by a high one below
		case v >= 0xd800 && v <= 0xdbff:
			next := body[i+5:]
			if len(next) < 6 || next[0] != '\\' || next[1] != 'u' {
				return true
			}
			lo, err := strconv.ParseUint(string(next[2:6]), 16, 16)
			if err != nil || lo < 0xdc00 || lo > 0xdfff {
				return true
			}
			i += 6 // past the pair's low half, with the += 4 below
		}
		i += 4
	}
	return false
}
