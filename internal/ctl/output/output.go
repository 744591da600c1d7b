package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	queengate "github.com/queengate/queengate"
)

// queueConfig is a queue's configuration as the gateway answers it
// (docs/admin-api.md), with the options read as a map: every option the
// gateway has, whether this queenctl knows it or not. Created only in a
// configure's answer, Partitions and Groups only in GET /queues/<queue>.
type queueConfig struct {
	queengate.QueueView
	Options    map[string]optionValue    `json:"options"`
	Created    *bool                     `json:"created,omitempty"`
	Partitions []queengate.PartitionView `json:"partitions"`
	Groups     []queengate.GroupView     `json:"groups"`
}

// stamp prints a time as the gateway writes it.
func stamp(t time.Time) string { return t.Format(time.RFC3339Nano) }

// decodeAnswer decodes a gateway's answer; a malformed one is reported as
// the gateway's error (exit 1), with the start of what it said.
func decodeAnswer(raw []byte, v any) error {
	if err := json.Unmarshal(raw, v); err != nil {
		s := string(raw)
		if len(s) > 200 {
			s = s[:200] + "…"
		}
		return fmt.Errorf("unexpected answer from the gateway (%v): %s", err, s)
	}
	return nil
}

// printJSON writes a gateway's JSON answer indented, for people and jq.
func printJSON(w io.Writer, raw []byte) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, bytes.TrimSpace(raw), "", "  "); err != nil {
		return fmt.Errorf("unexpected answer from the gateway (%v): %.200s", err, raw)
	}
	buf.WriteByte('\n')
	_, err := w.Write(buf.Bytes())
	return err
}

// joinJSON makes one JSON array of several answers.
func joinJSON(raws [][]byte) []byte {
	return append(append([]byte("["), bytes.Join(raws, []byte(","))...), ']')
}

// printable escapes what in s could drive a terminal or break a table:
// control characters (escape sequences, newlines, tabs), bidirectional
// controls and bytes that are not UTF-8, written as Go escapes (\x1b,
// \n, \u202e). Every string queenctl prints that came from the gateway
// or a user goes through it.
func printable(s string) string {
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

// row writes one line of a table: its cells, each made printable,
// separated by tabs.
func row(w io.Writer, cells ...any) {
	for i, c := range cells {
		if i > 0 {
			io.WriteString(w, "\t")
		}
		io.WriteString(w, printable(fmt.Sprint(c)))
	}
	io.WriteString(w, "\n")
}

func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
}

// printConfig writes one queue's configuration as aligned "key: value"
// lines.
func printConfig(w io.Writer, c *queueConfig) {
	tw := newTable(w)
	name := c.Queue
	if c.Created != nil && *c.Created {
		name += " (created)"
	}
	row(tw, "queue:", name)
	for _, o := range knownOptions {
		if v, ok := c.Options[o.name]; ok {
			row(tw, o.name+":", formatOption(o.name, v))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(c.Options)) {
		if _, known := findOption(k); !known {
			row(tw, k+":", formatOption(k, c.Options[k]))
		}
	}
	row(tw, "createdAt:", stamp(c.CreatedAt))
	row(tw, "updatedAt:", stamp(c.UpdatedAt))
	tw.Flush()
}

// optionCell is an option's value in a table, "-" when the answer lacks it.
func optionCell(c *queueConfig, name string) string {
	v, ok := c.Options[name]
	if !ok {
		return "-"
	}
	return formatOption(name, v)
}

func optionHeads() string {
	var h []string
	for _, o := range knownOptions {
		h = append(h, o.head)
	}
	return strings.Join(h, "\t")
}

// optionCells are a queue's options in the columns of optionHeads.
func optionCells(c *queueConfig) []any {
	var cells []any
	for _, o := range knownOptions {
		cells = append(cells, optionCell(c, o.name))
	}
	return cells
}

// flatten lists a JSON object's leaves as dotted keys, in the order the
// gateway wrote them, so status prints whatever figures the gateway has.
func flatten(raw []byte) ([][2]string, error) {
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
