package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"time"
)

// ErrHelpShown ends a run that printed the help it was asked for.
var ErrHelpShown = errors.New("help shown")

// UsageError is a mistake in the command line or the manifest; nothing was
// sent to the gateway.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

// Usagef is a UsageError with a formatted message.
func Usagef(format string, args ...any) error {
	return &UsageError{Msg: fmt.Sprintf(format, args...)}
}

// NewFlagSet makes a flag set that reports instead of printing or exiting:
// the caller decides what goes to stdout (help) and stderr (errors).
func NewFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// ParseInterspersed parses flags anywhere among the arguments
// (`configure payments --retention 7d`), which the flag package alone does
// not: it stops at the first argument that is not a flag. Everything after
// "--" is an argument, so a message such as -5 can be pushed.
func ParseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// negativeFlag is the first flag the command line set to a negative
// number, nil if none. Every number a command takes is a count, an
// offset, a size or a duration: a negative one is a mistake, never a way
// to say "not given" (a command tells a flag not given by fs.Visit).
func negativeFlag(fs *flag.FlagSet) (neg *flag.Flag) {
	fs.Visit(func(f *flag.Flag) {
		if g, ok := f.Value.(flag.Getter); ok && neg == nil && negative(g.Get()) {
			neg = f
		}
	})
	return neg
}

// negative says whether v is a number below 0.
func negative(v any) bool {
	switch n := v.(type) {
	case int:
		return n < 0
	case int64:
		return n < 0
	case float64:
		return n < 0
	case time.Duration:
		return n < 0
	}
	return false
}

// PrintHelp writes a command's usage, then its own flags, then the global
// ones.
func PrintHelp(w io.Writer, usage string, fs *flag.FlagSet, own []string) {
	fmt.Fprint(w, usage)
	if len(own) > 0 {
		fmt.Fprintln(w, "Flags:")
		fs.VisitAll(func(f *flag.Flag) {
			if slices.Contains(own, f.Name) {
				printFlag(w, f)
			}
		})
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "Global flags:")
	fs.VisitAll(func(f *flag.Flag) {
		if !slices.Contains(own, f.Name) {
			printFlag(w, f)
		}
	})
}

func printFlag(w io.Writer, f *flag.Flag) {
	name, usage := flag.UnquoteUsage(f)
	dash := "--"
	if len(f.Name) == 1 {
		dash = "-"
	}
	if name != "" {
		name = " " + name
	}
	fmt.Fprintf(w, "  %s%s%s\n        %s\n", dash, f.Name, name, usage)
}
