package cli

import (
	"bytes"
	"errors"
	"flag"
	"reflect"
	"strings"
	"testing"
)

// testProgram has one plain command (run, with --n) and one with
// subcommands (timer list, timer cancel); every command takes --g.
func testProgram() (*Program[string], *flag.FlagSet) {
	var global string
	globals := func(fs *flag.FlagSet) { fs.StringVar(&global, "g", global, "a global `value`") }
	setup := func(body string) func(*flag.FlagSet) string {
		return func(fs *flag.FlagSet) string {
			fs.Int("n", 1, "a count")
			return body
		}
	}
	p := &Program[string]{Name: "prog", Usage: "Usage: prog\n", Globals: globals, Commands: []*Command[string]{
		{Name: "run", Usage: "Usage: prog run\n", Setup: setup("run body")},
		{Name: "timer", Usage: "Usage: prog timer\n", Subs: []*Command[string]{
			{Name: "list", Usage: "Usage: prog timer list\n", Setup: setup("list body")},
			{Name: "cancel", Usage: "Usage: prog timer cancel\n", Setup: setup("cancel body")},
		}},
	}}
	top := NewFlagSet("prog")
	globals(top)
	return p, top
}

func TestFindAndParse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args     []string
		name     string
		body     string
		pos      []string
		errMatch string // empty: no error; "help": ErrHelpShown with this help
	}{
		{args: []string{"run", "a", "--n", "2", "b"}, name: "run", body: "run body", pos: []string{"a", "b"}},
		{args: []string{"timer", "--g", "x", "cancel", "id"}, name: "timer cancel", body: "cancel body", pos: []string{"id"}},
		{args: []string{"nope"}, errMatch: `unknown command "nope" (see prog --help)`},
		{args: []string{"timer"}, errMatch: `timer: use 'timer list' or 'timer cancel' (see prog timer --help)`},
		{args: []string{"timer", "stop"}, errMatch: `timer: unknown subcommand "stop": use 'timer list' or 'timer cancel'`},
		{args: []string{"run", "--x"}, errMatch: `run: flag provided but not defined: -x (see prog run --help)`},
		{args: []string{"run", "--n", "-3"}, errMatch: `run: --n -3: must not be negative (see prog run --help)`},
		{args: []string{"timer", "list", "--n=-1"}, errMatch: `timer list: --n -1: must not be negative (see prog timer list --help)`},
		{args: []string{"run", "--n", "0"}, name: "run", body: "run body"},
	} {
		p, top := testProgram()
		var out bytes.Buffer
		c, name, rest, err := p.Find(top, tc.args, &out)
		var body string
		var pos []string
		if err == nil {
			body, pos, err = p.Parse(c, name, rest, &out)
		}
		switch {
		case tc.errMatch != "":
			var ue *UsageError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.errMatch) {
				t.Errorf("%q: error %v, want a usage error with %q", tc.args, err, tc.errMatch)
			}
		case err != nil:
			t.Errorf("%q: %v", tc.args, err)
		case name != tc.name || body != tc.body || !reflect.DeepEqual(pos, tc.pos):
			t.Errorf("%q: found %q with body %q and arguments %q, want %q, %q, %q", tc.args, name, body, pos, tc.name, tc.body, tc.pos)
		}
	}
}

// "help COMMAND" and "COMMAND --help" show the command's usage, its own
// flags, then the global ones; a bare "help" shows the program's.
func TestHelpTopics(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"help"}, "Usage: prog\nGlobal flags:\n  -g value\n        a global value\n"},
		{[]string{"help", "run"}, "Usage: prog run\nFlags:\n  -n int\n        a count\n\nGlobal flags:\n  -g value\n        a global value\n"},
		{[]string{"timer", "list", "--help"}, "Usage: prog timer list\nFlags:\n  -n int\n        a count\n\nGlobal flags:\n  -g value\n        a global value\n"},
		{[]string{"help", "timer", "cancel"}, "Usage: prog timer cancel\nFlags:\n  -n int\n        a count\n\nGlobal flags:\n  -g value\n        a global value\n"},
		{[]string{"help", "timer"}, "Usage: prog timer\nGlobal flags:\n  -g value\n        a global value\n"},
	} {
		p, top := testProgram()
		var out bytes.Buffer
		c, name, rest, err := p.Find(top, tc.args, &out)
		if err == nil {
			_, _, err = p.Parse(c, name, rest, &out)
		}
		if !errors.Is(err, ErrHelpShown) || out.String() != tc.want {
			t.Errorf("%q: error %v, help\n%s\nwant\n%s", tc.args, err, out.String(), tc.want)
		}
	}
}
