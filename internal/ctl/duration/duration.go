package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	queengate "github.com/queengate/queengate"
)

// maxOptionSeconds is the largest option value the gateway accepts
// (docs/admin-api.md: at most 2147483647).
const maxOptionSeconds = 1<<31 - 1

// maxRetryBackoff is how many entries retryBackoffMs may have
// (docs/admin-api.md); each, like retryDelayMs, is at most
// queengate.MaxDelayMs.
const maxRetryBackoff = 64

// parseSeconds reads a duration flag as whole seconds: a Go duration
// (90s, 10m, 1h30m), optionally preceded by whole days (7d, 1d12h), or 0.
// The options are integer seconds on the wire, so a fraction of a second
// is an error rather than silently rounded.
func parseSeconds(s string) (int64, error) {
	tooLong := fmt.Errorf("too long, at most %d seconds (about 68 years)", maxOptionSeconds)
	days, d, err := parseDaysDuration(s, maxOptionSeconds/86400, tooLong)
	if err != nil {
		return 0, err
	}
	if d%time.Second != 0 {
		return 0, errors.New("must be whole seconds (the gateway stores seconds)")
	}
	total := days*86400 + int64(d/time.Second)
	if total > maxOptionSeconds {
		return 0, tooLong
	}
	return total, nil
}

// maxDelay is the longest --in: what a time.Duration holds (the gateway
// adds it to its clock).
const maxDelay = time.Duration(math.MaxInt64)

// parseDelayMs reads a delay in the same syntax as parseSeconds (7d, 1d12h,
// 90s, 0) as whole milliseconds, the wire's delayMs.
func parseDelayMs(s string) (int64, error) {
	maxDays := int64(maxDelay / (24 * time.Hour))
	tooLong := fmt.Errorf("too long, at most %dd (about 292 years)", maxDays)
	days, d, err := parseDaysDuration(s, maxDays, tooLong)
	if err != nil {
		return 0, err
	}
	if d%time.Millisecond != 0 {
		return 0, errors.New("must be whole milliseconds (delayMs on the wire)")
	}
	if time.Duration(days)*24*time.Hour > maxDelay-d {
		return 0, tooLong
	}
	return (time.Duration(days)*24*time.Hour + d).Milliseconds(), nil
}

// parseDaysDuration splits "7d12h" into whole days and a Go duration,
// both 0 or more; days over maxDays are tooLong. A bare number other than
// 0 is refused (which unit?).
func parseDaysDuration(s string, maxDays int64, tooLong error) (int64, time.Duration, error) {
	var days int64
	if i := strings.IndexByte(s, 'd'); i >= 0 {
		n, err := strconv.ParseInt(s[:i], 10, 64)
		if err == nil && n < 0 {
			return 0, 0, errors.New("must be 0 or more")
		}
		if err != nil || s[0] == '+' {
			return 0, 0, errors.New("days must be a whole number before the d, e.g. 7d or 1d12h")
		}
		if n > maxDays {
			return 0, 0, tooLong
		}
		days, s = n, s[i+1:]
		if s == "" {
			return days, 0, nil
		}
	}
	if _, err := strconv.ParseFloat(s, 64); err == nil && s != "0" {
		return 0, 0, fmt.Errorf("missing unit, e.g. %ss, 10m, 24h or 7d", s)
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, 0, errors.New("not a duration; use e.g. 600s, 10m, 24h or 7d")
	}
	if d < 0 {
		return 0, 0, errors.New("must be 0 or more")
	}
	return days, d, nil
}

// humanMs writes milliseconds as humanSeconds does, or as a Go duration
// (1.5s, 250ms) when not whole seconds.
func humanMs(ms int64) string {
	if ms%1000 == 0 {
		return humanSeconds(ms / 1000)
	}
	return (time.Duration(ms) * time.Millisecond).String()
}

// humanSeconds writes seconds the way an operator types them: 7d, 10m,
// 1h30m, 90s.
func humanSeconds(s int64) string {
	switch {
	case s == 0:
		return "0s"
	case s%86400 == 0:
		return strconv.FormatInt(s/86400, 10) + "d"
	}
	out := (time.Duration(s) * time.Second).String()
	// "1h0m0s" -> "1h", "10m0s" -> "10m", "1h30m0s" -> "1h30m".
	if strings.HasSuffix(out, "m0s") {
		out = strings.TrimSuffix(out, "0s")
	}
	if strings.HasSuffix(out, "h0m") {
		out = strings.TrimSuffix(out, "0m")
	}
	return out
}

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
	max   int64    // the largest number (0: maxOptionSeconds)
	list  bool     // a list of numbers
}

// most is the largest number the option (or each of its entries) takes.
func (o option) most() int64 { return cmp.Or(o.max, maxOptionSeconds) }

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
		return fmt.Sprintf("%d (%s)", v.Number, humanMs(v.Number))
	case o.unit != "" && o.unit != "seconds":
		return strconv.FormatInt(v.Number, 10)
	}
	return fmt.Sprintf("%d (%s)", v.Number, humanSeconds(v.Number))
}

// formatList writes a list of milliseconds with their meaning:
// "[1000, 5000] (1s, 5s)", or "[] (none)".
func formatList(ms []int64, empty string) string {
	if len(ms) == 0 {
		return "[] (" + empty + ")"
	}
	nums, human := make([]string, len(ms)), make([]string, len(ms))
	for i, v := range ms {
		nums[i], human[i] = strconv.FormatInt(v, 10), humanMs(v)
	}
	return "[" + strings.Join(nums, ", ") + "] (" + strings.Join(human, ", ") + ")"
}
