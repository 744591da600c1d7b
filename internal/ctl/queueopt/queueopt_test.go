package queueopt

import "testing"

func TestFormatOption(t *testing.T) {
	t.Parallel()
	if got := Format("dedupWindowSeconds", Seconds(0)); got != "0 (off)" {
		t.Errorf("Format window 0 = %q", got)
	}
	if got := Format("retentionSeconds", Seconds(604800)); got != "604800 (7d)" {
		t.Errorf("Format retention 7d = %q", got)
	}
	if got := Format("onConflict", Word("flag")); got != "flag" {
		t.Errorf("Format onConflict flag = %q", got)
	}
}
