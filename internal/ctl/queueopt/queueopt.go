package queueopt

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

// Config is a queue's configuration as the gateway answers it
// (docs/admin-api.md), with the options read as a map: every option the
// gateway has, whether this queenctl knows it or not. Created only in a
// configure's answer, Partitions and Groups only in GET /queues/<queue>.
type Config struct {
	queengate.QueueView
	Options    map[string]Value          `json:"options"`
	Created    *bool                     `json:"created,omitempty"`
	Partitions []queengate.PartitionView `json:"partitions"`
	Groups     []queengate.GroupView     `json:"groups"`
}

// MaxRetryBackoff is how many entries retryBackoffMs may have
// (docs/admin-api.md); each, like retryDelayMs, is at most
// queengate.MaxDelayMs.
const MaxRetryBackoff = 64

// Option is one queue option of docs/admin-api.md. queenctl knows the
// defaults so that a dry run can show what "replace" resets. An option is
// a whole number of its unit, or with words one of those words, or a
// list of whole numbers of its unit.
type Option struct {
	Name  string
	Def   Value
	Zero  string   // what 0 (or an empty list) means, for people
	Head  string   // table column heading
	Unit  string   // "seconds", "milliseconds", or what a number counts
	Words []string // the values of a word option
	Max   int64    // the largest number (0: duration.MaxSeconds)
	List  bool     // a list of numbers
}

// Most is the largest number the option (or each of its entries) takes.
func (o Option) Most() int64 { return cmp.Or(o.Max, duration.MaxSeconds) }

// Known are the options queenctl knows, in the order it prints them.
var Known = []Option{
	{Name: "dedupWindowSeconds", Def: Seconds(3600), Zero: "off", Head: "DEDUP WINDOW", Unit: "seconds"},
	{Name: "retentionSeconds", Def: Seconds(0), Zero: "keep forever", Head: "RETENTION", Unit: "seconds"},
	{Name: "onConflict", Def: Word("ignore"), Head: "ON CONFLICT", Words: []string{"ignore", "flag", "reject"}},
	{Name: "maxAttempts", Def: Count(5), Zero: "never dead-letter", Head: "MAX ATTEMPTS", Unit: "deliveries"},
	{Name: "retainUntil", Def: Word("age"), Head: "RETAIN UNTIL", Words: []string{"age", "consumed"}},
	{Name: "retryDelayMs", Def: Count(0), Zero: "at once", Head: "RETRY DELAY", Unit: "milliseconds", Max: queengate.MaxDelayMs},
	{Name: "retryBackoffMs", Def: List(), Zero: "none", Head: "RETRY BACKOFF", Unit: "milliseconds", Max: queengate.MaxDelayMs, List: true},
	{Name: "maxAckPending", Def: Count(0), Zero: "no limit", Head: "MAX ACK PENDING", Unit: "messages"},
	{Name: "groupIdleSeconds", Def: Seconds(0), Zero: "groups always hold", Head: "GROUP IDLE", Unit: "seconds"},
	{Name: "maxUnheardDeliveries", Def: Count(3), Zero: "never count", Head: "MAX UNHEARD", Unit: "deliveries", Max: 1000},
}

// Value is an option's value: a whole number, a word, or a list
// of whole numbers.
type Value struct {
	Number int64
	Word   string  // set for a word option
	List   []int64 // set, empty or not, for a list option
}

// Seconds, Count, Word and List make a value of each kind.
func Seconds(v int64) Value  { return Value{Number: v} }
func Count(v int64) Value    { return Value{Number: v} }
func Word(w string) Value    { return Value{Word: w} }
func List(v ...int64) Value  { return Value{List: append([]int64{}, v...)} }
func (v Value) isList() bool { return v.List != nil }

// Equal reports whether v and w are the same value.
func (v Value) Equal(w Value) bool {
	return v.Number == w.Number && v.Word == w.Word && v.isList() == w.isList() && slices.Equal(v.List, w.List)
}

// MarshalJSON writes the value as on the wire: a number, a string or an
// array.
func (v Value) MarshalJSON() ([]byte, error) {
	switch {
	case v.Word != "":
		return json.Marshal(v.Word)
	case v.isList():
		return json.Marshal(v.List)
	}
	return json.Marshal(v.Number)
}

// UnmarshalJSON reads a number, a string or an array.
func (v *Value) UnmarshalJSON(raw []byte) error {
	*v = Value{}
	switch {
	case len(raw) > 0 && raw[0] == '"':
		return json.Unmarshal(raw, &v.Word)
	case len(raw) > 0 && raw[0] == '[':
		v.List = []int64{}
		return json.Unmarshal(raw, &v.List)
	}
	return json.Unmarshal(raw, &v.Number)
}

// Find is the known option called name.
func Find(name string) (Option, bool) {
	for _, o := range Known {
		if o.Name == name {
			return o, true
		}
	}
	return Option{}, false
}

// Format writes an option value with its meaning: "600 (10m)",
// "0 (off)", "flag".
func Format(name string, v Value) string {
	if v.Word != "" {
		return v.Word
	}
	o, _ := Find(name)
	switch {
	case v.isList():
		return formatList(v.List, o.Zero)
	case v.Number == 0 && o.Zero != "":
		return "0 (" + o.Zero + ")"
	case o.Unit == "milliseconds":
		return fmt.Sprintf("%d (%s)", v.Number, duration.HumanMs(v.Number))
	case o.Unit != "" && o.Unit != "seconds":
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

// PrintConfig writes one queue's configuration as aligned "key: value"
// lines.
func PrintConfig(w io.Writer, c *Config) {
	tw := output.NewTable(w)
	name := c.Queue
	if c.Created != nil && *c.Created {
		name += " (created)"
	}
	output.Row(tw, "queue:", name)
	for _, o := range Known {
		if v, ok := c.Options[o.Name]; ok {
			output.Row(tw, o.Name+":", Format(o.Name, v))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(c.Options)) {
		if _, known := Find(k); !known {
			output.Row(tw, k+":", Format(k, c.Options[k]))
		}
	}
	output.Row(tw, "createdAt:", output.Stamp(c.CreatedAt))
	output.Row(tw, "updatedAt:", output.Stamp(c.UpdatedAt))
	tw.Flush()
}

// optionCell is an option's value in a table, "-" when the answer lacks it.
func optionCell(c *Config, name string) string {
	v, ok := c.Options[name]
	if !ok {
		return "-"
	}
	return Format(name, v)
}

// Heads are the column headings of the known options, tab-separated.
func Heads() string {
	var h []string
	for _, o := range Known {
		h = append(h, o.Head)
	}
	return strings.Join(h, "\t")
}

// Cells are a queue's options in the columns of Heads.
func Cells(c *Config) []any {
	var cells []any
	for _, o := range Known {
		cells = append(cells, optionCell(c, o.Name))
	}
	return cells
}
