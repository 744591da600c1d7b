package output

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"
)

// Stamp prints a time as the gateway writes it.
func Stamp(t time.Time) string { return t.Format(time.RFC3339Nano) }

// DecodeAnswer decodes a gateway's answer; a malformed one is reported as
// the gateway's error (exit 1), with the start of what it said.
func DecodeAnswer(raw []byte, v any) error {
	if err := json.Unmarshal(raw, v); err != nil {
		s := string(raw)
		if len(s) > 200 {
			s = s[:200] + "…"
		}
		return fmt.Errorf("unexpected answer from the gateway (%v): %s", err, s)
	}
	return nil
}

// PrintJSON writes a gateway's JSON answer indented, for people and jq.
func PrintJSON(w io.Writer, raw []byte) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, bytes.TrimSpace(raw), "", "  "); err != nil {
		return fmt.Errorf("unexpected answer from the gateway (%v): %.200s", err, raw)
	}
	buf.WriteByte('\n')
	_, err := w.Write(buf.Bytes())
	return err
}

// JoinJSON makes one JSON array of several answers.
func JoinJSON(raws [][]byte) []byte {
	return append(append([]byte("["), bytes.Join(raws, []byte(","))...), ']')
}

// Printable escapes what in s could drive a terminal or break a table:
// control characters (escape sequences, newlines, tabs), bidirectional
// controls and bytes that are not UTF-8, written as Go escapes (\x1b,
// \n, \u202e). Every string queenctl prints that came from the gateway
// or a user goes through it.
func Printable(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r):
			q := strconv.QuoteRuneToASCII(r)
			b.WriteString(q[1 : len(q)-1]) // without its quotes
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// Row writes one line of a table: its cells, each made Printable,
// separated by tabs.
func Row(w io.Writer, cells ...any) {
	for i, c := range cells {
		if i > 0 {
			io.WriteString(w, "\t")
		}
		io.WriteString(w, Printable(fmt.Sprint(c)))
	}
	io.WriteString(w, "\n")
}

func NewTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
}

// Flatten lists a JSON object's leaves as dotted keys, in the order the
// gateway wrote them, so status prints whatever figures the gateway has.
func Flatten(raw []byte) ([][2]string, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var out [][2]string
	var walk func(prefix string) error
	walk = func(prefix string) error {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{':
				for dec.More() {
					k, err := dec.Token()
					if err != nil {
						return err
					}
					key := k.(string)
					if prefix != "" {
						key = prefix + "." + key
					}
					if err := walk(key); err != nil {
						return err
					}
				}
			case '[':
				for i := 0; dec.More(); i++ {
					if err := walk(prefix + "." + strconv.Itoa(i)); err != nil {
						return err
					}
				}
			}
			_, err := dec.Token() // the closing delimiter
			return err
		case nil:
			out = append(out, [2]string{prefix, "null"})
		default:
			out = append(out, [2]string{prefix, fmt.Sprint(t)})
		}
		return nil
	}
	if err := walk(""); err != nil {
		return nil, fmt.Errorf("unexpected answer from the gateway (%v): %.200s", err, raw)
	}
	return out, nil
}

// OrDash prints an optional time as the gateway writes it, or "-".
func OrDash(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return Stamp(*t)
}

// HumanBytes prints a byte count in B, KiB, MiB or GiB.
func HumanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 2; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMG"[exp])
}
