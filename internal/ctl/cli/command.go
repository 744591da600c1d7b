package cli

import (
	"errors"
	"flag"
	"io"
	"strings"
)

// Command is one command of a program. Setup registers its flags on a
// fresh flag set and returns its body R, which reads them: no flag state
// is shared between runs (tests run many at once). A command with Subs
// (timer) has no body of its own: its first argument names one of them.
type Command[R any] struct {
	Name  string
	Usage string
	Setup func(fs *flag.FlagSet) R
	Subs  []*Command[R] // in the order the usage lists them
}

// Program is a command table with what every command shares.
type Program[R any] struct {
	Name     string // in flag sets and in "see NAME --help"
	Usage    string // the main help
	Commands []*Command[R]
	Globals  func(fs *flag.FlagSet) // registers the global flags
}

// Find finds the command (with its subcommand, if it has subs) that args
// name first, and returns it with its full name and its arguments. "help"
// names the command it asks about, whose arguments become --help; top is
// the program's own flag set, shown by a bare "help".
func (p *Program[R]) Find(top *flag.FlagSet, args []string, stdout io.Writer) (*Command[R], string, []string, error) {
	name, rest := args[0], args[1:]
	if name == "help" {
		if len(rest) == 0 {
			PrintHelp(stdout, p.Usage, top, nil)
			return nil, "", nil, ErrHelpShown
		}
		// "help timer schedule" is "timer schedule --help".
		topic := rest
		name, rest = topic[0], []string{"--help"}
		if c := findNamed(p.Commands, name); c != nil && c.Subs != nil && len(topic) > 1 {
			rest = []string{topic[1], "--help"}
		}
	}
	c := findNamed(p.Commands, name)
	if c == nil {
		return nil, "", nil, Usagef("unknown command %q (see %s --help)", name, p.Name)
	}
	if c.Subs != nil {
		return p.pickSub(c, name, rest, stdout)
	}
	return c, name, rest, nil
}

// Parse parses command c's flags (its own and the global ones, among its
// arguments args) and returns its body and its positional arguments.
func (p *Program[R]) Parse(c *Command[R], name string, args []string, stdout io.Writer) (R, []string, error) {
	fs := NewFlagSet(p.Name + " " + name)
	body := c.Setup(fs)
	var own []string
	fs.VisitAll(func(f *flag.Flag) { own = append(own, f.Name) })
	p.Globals(fs)
	pos, err := ParseInterspersed(fs, args)
	if err != nil {
		var none R
		if errors.Is(err, flag.ErrHelp) {
			PrintHelp(stdout, c.Usage, fs, own)
			return none, nil, ErrHelpShown
		}
		return none, nil, Usagef("%s: %v (see %s %s --help)", name, err, p.Name, name)
	}
	if f := negativeFlag(fs); f != nil {
		var none R
		return none, nil, Usagef("%s: --%s %s: must not be negative (see %s %s --help)", name, f.Name, f.Value, p.Name, name)
	}
	return body, pos, nil
}

// findNamed is the command of cmds called name, nil if there is none.
func findNamed[R any](cmds []*Command[R], name string) *Command[R] {
	for _, c := range cmds {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// pickSub finds the subcommand of c that rest names first ("timer
// schedule ..."); global flags may come before it. It returns the
// subcommand, its full name and its arguments.
func (p *Program[R]) pickSub(c *Command[R], name string, rest []string, stdout io.Writer) (*Command[R], string, []string, error) {
	fs := NewFlagSet(p.Name + " " + name)
	p.Globals(fs)
	if err := fs.Parse(rest); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			PrintHelp(stdout, c.Usage, fs, nil)
			return nil, "", nil, ErrHelpShown
		}
		return nil, "", nil, Usagef("%s: %v (see %s %s --help)", name, err, p.Name, name)
	}
	rest = fs.Args()
	var subs []string
	for _, sub := range c.Subs {
		subs = append(subs, "'"+name+" "+sub.Name+"'")
	}
	which := strings.Join(subs[:len(subs)-1], ", ") + " or " + subs[len(subs)-1]
	if len(rest) == 0 {
		return nil, "", nil, Usagef("%s: use %s (see %s %s --help)", name, which, p.Name, name)
	}
	sub := findNamed(c.Subs, rest[0])
	if sub == nil {
		return nil, "", nil, Usagef("%s: unknown subcommand %q: use %s (see %s %s --help)", name, rest[0], which, p.Name, name)
	}
	return sub, name + " " + rest[0], rest[1:], nil
}
