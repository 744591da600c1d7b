package main

import "testing"

func TestFormatOption(t *testing.T) {
	t.Parallel()
	if got := formatOption("dedupWindowSeconds", seconds(0)); got != "0 (off)" {
		t.Errorf("formatOption window 0 = %q", got)
	}
	if got := formatOption("retentionSeconds", seconds(604800)); got != "604800 (7d)" {
		t.Errorf("formatOption retention 7d = %q", got)
	}
	if got := formatOption("onConflict", word("flag")); got != "flag" {
		t.Errorf("formatOption onConflict flag = %q", got)
	}
}
