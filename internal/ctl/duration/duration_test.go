package duration

import (
	"strings"
	"testing"
)

func TestParseSeconds(t *testing.T) {
	t.Parallel()
	ok := map[string]int64{
		"0":           0,
		"0s":          0,
		"90s":         90,
		"10m":         600,
		"1h30m":       5400,
		"24h":         86400,
		"7d":          604800,
		"1d12h":       129600,
		"0d":          0,
		"1500ms":      -1, // not whole seconds: below
		"2000ms":      2,
		"24855d":      24855 * 86400,
		"596523h":     596523 * 3600,
		"68y":         -1,
		"1d1s":        86401,
		"2147483647s": 2147483647,
	}
	for in, want := range ok {
		got, err := ParseSeconds(in)
		if want < 0 {
			if err == nil {
				t.Errorf("ParseSeconds(%q) = %d, want an error", in, got)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("ParseSeconds(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	bad := map[string]string{
		"600":         "missing unit, e.g. 600s",
		"1.5s":        "must be whole seconds",
		"-5m":         "must be 0 or more",
		"-1d":         "must be 0 or more",
		"1.5d":        "days must be a whole number",
		"d":           "days must be a whole number",
		"+1d":         "days must be a whole number",
		"10 minutes":  "not a duration",
		"":            "not a duration",
		"24856d":      "too long, at most 2147483647 seconds",
		"2147483648s": "too long",
		"1d-1h":       "must be 0 or more",
	}
	for in, want := range bad {
		_, err := ParseSeconds(in)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseSeconds(%q): error %v, want one containing %q", in, err, want)
		}
	}
}

func TestHumanSeconds(t *testing.T) {
	t.Parallel()
	for in, want := range map[int64]string{
		0: "0s", 1: "1s", 90: "1m30s", 600: "10m", 3600: "1h", 5400: "1h30m",
		3601: "1h0m1s", 86400: "1d", 604800: "7d", 90000: "25h",
	} {
		if got := HumanSeconds(in); got != want {
			t.Errorf("HumanSeconds(%d) = %q, want %q", in, got, want)
		}
		// What HumanSeconds writes, ParseSeconds reads back.
		if back, err := ParseSeconds(HumanSeconds(in)); err != nil || back != in {
			t.Errorf("ParseSeconds(HumanSeconds(%d)) = %d, %v", in, back, err)
		}
	}
}

func TestParseDelayMs(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int64{
		"0": 0, "0s": 0, "0d": 0, "90s": 90000, "1500ms": 1500, "10m": 600000, "1h30m": 5400000,
		"7d": 7 * 86400000, "1d12h": 129600000, "106751d": 106751 * 86400000,
	} {
		if got, err := ParseDelayMs(in); err != nil || got != want {
			t.Errorf("ParseDelayMs(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for in, want := range map[string]string{
		"90": "missing unit", "-1s": "must be 0 or more", "-2d": "must be 0 or more", "1d-1h": "must be 0 or more",
		"1.5d": "days must be a whole number", "1ms500us": "must be whole milliseconds", "": "not a duration",
		"106752d": "too long", "106751d24h": "too long", "9999999999h": "not a duration",
	} {
		if _, err := ParseDelayMs(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseDelayMs(%q): error %v, want one containing %q", in, err, want)
		}
	}
}
