package docwords

import (
	"os"
	"slices"
	"testing"
)

func TestTheProjectsWordsRetireSome(t *testing.T) {
	doc, err := os.ReadFile("../../docs/design.md")
	if err != nil {
		t.Fatal(err)
	}
	retired, err := Retired(string(doc))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"record", "segment", "dlq"} {
		if !slices.Contains(retired, w) {
			t.Errorf("docs/design.md's Words retire %v, not %q", retired, w)
		}
	}
}

// TestAUseIsFound: planted uses are found, whole words in any case, and
// identifiers that only contain a word are not.
func TestAUseIsFound(t *testing.T) {
	doc := "x\n" + header + "\n|---|---|---|\n| frame | one row | `segment` |\n| ack | settling | |\n| dead letter | given up | `dlq` (the wire's) |\n\nafter | `nope` |\n"
	retired, err := Retired(doc)
	if err != nil || !slices.Equal(retired, []string{"segment", "dlq"}) {
		t.Fatalf("Retired: %v, %v; want [segment dlq]", retired, err)
	}
	for text, want := range map[string][]string{
		"Partition segments per bundle.": {"segment"},
		"Segment sizes":                  {"segment"},
		"moved to the DLQ":               {"dlq"},
		"rows of log_segments deleted":   nil,
		"frames per bundle":              nil,
		"segmentation":                   nil,
	} {
		if got := Used(text, retired); !slices.Equal(got, want) {
			t.Errorf("Used(%q) = %v, want %v", text, got, want)
		}
	}
	if _, err := Retired("no table here"); err == nil {
		t.Error("a doc without the table read as one")
	}
}
