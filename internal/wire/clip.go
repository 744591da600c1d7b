package wire

import (
	"strconv"
	"unicode/utf8"
)

// maxEcho bounds what of a request's own input an error quotes back.
const maxEcho = 128

// Clip is s cut to maxEcho bytes, saying how long it was: an error echoes
// what to fix, never a whole large input.
func Clip(s string) string { return ClipTo(s, maxEcho) }

// ClipTo cuts s to n bytes on a character boundary, saying how long it was.
func ClipTo(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return ClipBytes(s, n) + "… (" + strconv.Itoa(len(s)) + " bytes)"
}

// ClipBytes cuts s to at most n bytes, on a character boundary.
func ClipBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
