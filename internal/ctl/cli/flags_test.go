package cli

import (
	"reflect"
	"testing"
)

func TestParseInterspersed(t *testing.T) {
	t.Parallel()
	fs := NewFlagSet("t")
	a := fs.String("a", "", "")
	b := fs.Bool("b", false, "")
	pos, err := ParseInterspersed(fs, []string{"x", "-a", "1", "y", "-b", "--", "-5", "-a"})
	if err != nil {
		t.Fatal(err)
	}
	if *a != "1" || !*b || !reflect.DeepEqual(pos, []string{"x", "y", "-5", "-a"}) {
		t.Errorf("a=%q b=%v pos=%q", *a, *b, pos)
	}
}
