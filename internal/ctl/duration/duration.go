package duration

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// MaxSeconds is the largest option value the gateway accepts
// (docs/admin-api.md: at most 2147483647).
const MaxSeconds = 1<<31 - 1

// ParseSeconds reads a duration flag as whole seconds: a Go duration
// (90s, 10m, 1h30m), optionally preceded by whole days (7d, 1d12h), or 0.
// The options are integer seconds on the wire, so a fraction of a second
// is an error rather than silently rounded.
func ParseSeconds(s string) (int64, error) {
	tooLong := fmt.Errorf("too long, at most %d seconds (about 68 years)", MaxSeconds)
	days, d, err := parseDaysDuration(s, MaxSeconds/86400, tooLong)
	if err != nil {
		return 0, err
	}
	if d%time.Second != 0 {
		return 0, errors.New("must be whole seconds (the gateway stores seconds)")
	}
	total := days*86400 + int64(d/time.Second)
	if total > MaxSeconds {
		return 0, tooLong
	}
	return total, nil
}

// maxDelay is the longest --in: what a time.Duration holds (the gateway
// adds it to its clock).
const maxDelay = time.Duration(math.MaxInt64)

// ParseDelayMs reads a delay in the same syntax as ParseSeconds (7d, 1d12h,
// 90s, 0) as whole milliseconds, the wire's delayMs.
func ParseDelayMs(s string) (int64, error) {
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

// HumanMs writes milliseconds as HumanSeconds does, or as a Go duration
// (1.5s, 250ms) when not whole seconds.
func HumanMs(ms int64) string {
	if ms%1000 == 0 {
		return HumanSeconds(ms / 1000)
	}
	return (time.Duration(ms) * time.Millisecond).String()
}

// HumanSeconds writes seconds the way an operator types them: 7d, 10m,
// 1h30m, 90s.
func HumanSeconds(s int64) string {
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
