package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	queengate "github.com/queengate/queengate"
	"github.com/queengate/queengate/internal/ctl/duration"
	"github.com/queengate/queengate/internal/ctl/output"
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

// maxRetryBackoff is how many entries retryBackoffMs may have
// (docs/admin-api.md); each, like retryDelayMs, is at most
// queengate.MaxDelayMs.
const maxRetryBackoff = 64

// option is one queue option of docs/admin-api.md. queenctl knows the
// defaults so that a dry run can show what "replace" resets. An option is
// a whole number of its unit, or with words one of those words, or a
// list of whole numbers of its unit.
type option struct {
	name  string
	def   optionValue
	zero  string   // what 0 (or an empty list) means, for people
	head  string   // table column heading
	unit  string   // "seconds", "milliseconds", or what a number counts
	words []string // the values of a word option
	max   int64    // the largest number (0: duration.MaxSeconds)
	list  bool     // a list of numbers
}

// most is the largest number the option (or each of its entries) takes.
func (o option) most() int64 { return cmp.Or(o.max, duration.MaxSeconds) }

var knownOptions = []option{
	{name: "dedupWindowSeconds", def: seconds(3600), zero: "off", head: "DEDUP WINDOW", unit: "seconds"},
	{name: "retentionSeconds", def: seconds(0), zero: "keep forever", head: "RETENTION", unit: "seconds"},
	{name: "onConflict", def: word("ignore"), head: "ON CONFLICT", words: []string{"ignore", "flag", "reject"}},
	{name: "maxAttempts", def: count(5), zero: "never dead-letter", head: "MAX ATTEMPTS", unit: "deliveries"},
	{name: "retainUntil", def: word("age"), head: "RETAIN UNTIL", words: []string{"age", "consumed"}},
	{name: "retryDelayMs", def: count(0), zero: "at once", head: "RETRY DELAY", unit: "milliseconds", max: queengate.MaxDelayMs},
	{name: "retryBackoffMs", def: list(), zero: "none", head: "RETRY BACKOFF", unit: "milliseconds", max: queengate.MaxDelayMs, list: true},
	{name: "maxAckPending", def: count(0), zero: "no limit", head: "MAX ACK PENDING", unit: "messages"},
	{name: "groupIdleSeconds", def: seconds(0), zero: "groups always hold", head: "GROUP IDLE", unit: "seconds"},
}

// optionValue is an option's value: a whole number, a word, or a list
// of whole numbers.
type optionValue struct {
	Number int64
	Word   string  // set for a word option
	List   []int64 // set, empty or not, for a list option
}

func seconds(v int64) optionValue  { return optionValue{Number: v} }
func count(v int64) optionValue    { return optionValue{Number: v} }
func word(w string) optionValue    { return optionValue{Word: w} }
func list(v ...int64) optionValue  { return optionValue{List: append([]int64{}, v...)} }
func (v optionValue) isList() bool { return v.List != nil }

// equal reports whether v and w are the same value.
func (v optionValue) equal(w optionValue) bool {
	return v.Number == w.Number && v.Word == w.Word && v.isList() == w.isList() && slices.Equal(v.List, w.List)
}

// MarshalJSON writes the value as on the wire: a number, a string or an
// array.
func (v optionValue) MarshalJSON() ([]byte, error) {
	switch {
	case v.Word != "":
		return json.Marshal(v.Word)
	case v.isList():
		return json.Marshal(v.List)
	}
	return json.Marshal(v.Number)
}

// UnmarshalJSON reads a number, a string or an array.
func (v *optionValue) UnmarshalJSON(raw []byte) error {
	*v = optionValue{}
	switch {
	case len(raw) > 0 && raw[0] == '"':
		return json.Unmarshal(raw, &v.Word)
	case len(raw) > 0 && raw[0] == '[':
		v.List = []int64{}
		return json.Unmarshal(raw, &v.List)
	}
	return json.Unmarshal(raw, &v.Number)
}

func findOption(name string) (option, bool) {
	for _, o := range knownOptions {
		if o.name == name {
			return o, true
		}
	}
	return option{}, false
}

// formatOption writes an option value with its meaning: "600 (10m)",
// "0 (off)", "flag".
func formatOption(name string, v optionValue) string {
	if v.Word != "" {
		return v.Word
	}
	o, _ := findOption(name)
	switch {
	case v.isList():
		return formatList(v.List, o.zero)
	case v.Number == 0 && o.zero != "":
		return "0 (" + o.zero + ")"
	case o.unit == "milliseconds":
		return fmt.Sprintf("%d (%s)", v.Number, duration.HumanMs(v.Number))
	case o.unit != "" && o.unit != "seconds":
		return strconv.FormatInt(v.Number, 10)
	}
	return fmt.Sprintf("%d (%s)", v.Number, duration.HumanSeconds(v.Number))
}

// formatList writes a list of milliseconds with their meaning:
// "[1000, 5000] (1s, 5s)", or "[] (none)".
func formatList(ms []int64, empty string) string {
	if len(ms) == 0 {
		return "[] (" + empty + ")"
	}
	nums, human := make([]string, len(ms)), make([]string, len(ms))
	for i, v := range ms {
		nums[i], human[i] = strconv.FormatInt(v, 10), duration.HumanMs(v)
	}
	return "[" + strings.Join(nums, ", ") + "] (" + strings.Join(human, ", ") + ")"
}

// printConfig writes one queue's configuration as aligned "key: value"
// lines.
func printConfig(w io.Writer, c *queueConfig) {
	tw := output.NewTable(w)
	name := c.Queue
	if c.Created != nil && *c.Created {
		name += " (created)"
	}
	output.Row(tw, "queue:", name)
	for _, o := range knownOptions {
		if v, ok := c.Options[o.name]; ok {
			output.Row(tw, o.name+":", formatOption(o.name, v))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(c.Options)) {
		if _, known := findOption(k); !known {
			output.Row(tw, k+":", formatOption(k, c.Options[k]))
		}
	}
	output.Row(tw, "createdAt:", output.Stamp(c.CreatedAt))
	output.Row(tw, "updatedAt:", output.Stamp(c.UpdatedAt))
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
