// Command queenctl is the operator CLI of queengate: it applies queue
// manifests, configures and inspects queues, pushes messages, schedules,
// cancels and lists timers, and reads a gateway's status. It speaks only
// the wire contract (docs/protocol.md and docs/admin-api.md), over the admin
// HTTP address or NATS, so of this module it imports only the wire
// contract (package queengate) and its own parts under internal/ctl.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/queengate/queengate/internal/ctl/admin"
	"github.com/queengate/queengate/internal/ctl/output"
)

// Exit codes scripts can rely on; `queenctl --help` and the README list them.
const (
	exitOK          = 0 // success
	exitGateway     = 1 // the gateway answered an error, or a pushed message failed
	exitUsage       = 2 // bad flags or arguments, invalid manifest: nothing was sent
	exitUnreachable = 3 // no gateway answered: connection refused, timeout, no responders
	exitRefused     = 4 // NATS refused a subject: the user lacks the permission
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is the whole program, environment from the process.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return runEnv(ctx, args, os.LookupEnv, stdin, stdout, stderr)
}

// runEnv is run with the environment passed in, so tests do not depend on
// (or change) the process's QUEEN_* variables.
func runEnv(ctx context.Context, args []string, env func(string) (string, bool), stdin io.Reader, stdout, stderr io.Writer) int {
	err := dispatch(ctx, args, env, stdin, stdout, stderr)
	if err == nil || errors.Is(err, errHelpShown) {
		return exitOK
	}
	// Line by line: a manifest's errors are one per line; what the
	// gateway said is escaped whole (admin.GatewayError).
	lines := strings.Split(err.Error(), "\n")
	for i := range lines {
		lines[i] = output.Printable(lines[i])
	}
	fmt.Fprintln(stderr, "queenctl:", strings.Join(lines, "\n"))
	return exitCode(err)
}

// errHelpShown ends a run that printed the help it was asked for.
var errHelpShown = errors.New("help shown")

// usageError is a mistake in the command line or the manifest; nothing was
// sent to the gateway.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// failedError says that some pushed messages answered "failed", and how
// many of them are payload conflicts, which every retry meets again.
type failedError struct{ failed, conflicts, total int }

func (e *failedError) Error() string {
	s := fmt.Sprintf("%d of %d messages failed (not stored; see the error column)", e.failed, e.total)
	if e.conflicts > 0 {
		s += fmt.Sprintf("; %d by a payload conflict (the transactionId is stored with other data), which a retry fails again", e.conflicts)
	}
	if retryable := e.failed - e.conflicts; retryable == e.failed {
		s += "; retrying them with the same transactionId is safe"
	} else if retryable > 0 {
		s += fmt.Sprintf("; retrying the other %d with the same transactionId is safe", retryable)
	}
	return s
}

func exitCode(err error) int {
	var (
		ue *usageError
		ae *admin.AddressError
		ur *admin.UnreachableError
		re *admin.RefusedError
	)
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue), errors.As(err, &ae):
		return exitUsage
	case errors.As(err, &ur):
		return exitUnreachable
	case errors.As(err, &re):
		return exitRefused
	default:
		return exitGateway
	}
}

const mainUsage = `queenctl is the operator CLI of queengate.

Usage:
  queenctl [global flags] <command> [arguments] [flags]

Commands:
  apply -f FILE [--dry-run]     configure every queue a manifest names (mode replace)
  configure QUEUE [flags]       change one queue's options (mode merge; --replace)
  get queues                    list queues and their options
  get queue QUEUE               one queue, with its partitions' figures and groups
  get groups QUEUE              the queue's consumer groups: position, lag, lease
  delete group QUEUE GROUP [--yes]
                                delete a consumer group, releasing what it held;
                                asks for confirmation unless --yes
  create group QUEUE GROUP [--start earliest|latest | --offset P=N ... | --at TIME]
                                create a consumer group starting where it says
  seek group QUEUE GROUP (--offset N | --at TIME) [--partition P] [--yes]
                                move a consumer group back or forward; asks for
                                confirmation unless --yes
  delete queue QUEUE [--yes]    delete a queue with everything of it; asks first
  purge queue QUEUE [--partition P] [--yes]
                                delete a queue's messages and timers, keeping its
                                transactionIds and groups; asks first
  get message ID | QUEUE PARTITION TRANSACTION_ID
                                one stored message
  read QUEUE PARTITION [--from N] [--follow]
                                a partition's messages as JSON lines
  explain QUEUE PARTITION TRANSACTION_ID
                                what a push of the id would answer now, and why
  push QUEUE [PARTITION] [MESSAGE ...]
                                push messages (arguments, or JSON lines on stdin); needs --nats
  consume QUEUE [PARTITION] --group GROUP
                                print a consumer group's messages as JSON lines, and
                                acknowledge them; needs --nats
  dlq list QUEUE                the queue's dead letters not yet redriven
  dlq redrive QUEUE [--yes]     push dead letters back to their partition, exactly once
  status                        the gateway's health and cache figures
  timer schedule QUEUE PARTITION [DATA] (--at TIME | --in DURATION)
                                schedule a message, exactly once; needs --nats
  timer cancel TIMER_ID         cancel a pending timer: cancelled or absent; needs --nats
  timer list [--queue QUEUE]    pending timers, due first
  version                       queenctl's version (also --version)
  help [COMMAND]                this help, or a command's

Run 'queenctl COMMAND --help' for a command's arguments and flags. Global
flags go before or after the command.

Connection: admin commands (and timer list) use --http when given, else
--nats; push, consume, timer schedule and timer cancel use --nats only.
With neither, --http http://127.0.0.1:6632 is used.

Exit codes:
  0  success
  1  the gateway answered an error (its message is printed), or a pushed
     message answered "failed"
  2  usage error: bad flags or arguments, invalid manifest (nothing was sent)
  3  could not reach the gateway: connection refused, timeout, no responders
  4  NATS refused a subject: the NATS user lacks the permission to publish
     (or subscribe) there ("NATS refused: permissions violation for ...")

`

// version is set at build time with -ldflags "-X main.version=…"; a
// binary built by `go install …@vX` reports that module version instead.
var version = "0.1.0-dev"

func buildVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && version == "0.1.0-dev" &&
		bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return version
}

// dispatch parses the global flags and runs one command.
func dispatch(ctx context.Context, args []string, env func(string) (string, bool), stdin io.Reader, stdout, stderr io.Writer) error {
	g := newGlobals(env)
	top := newFlagSet("queenctl")
	g.register(top)
	showVersion := top.Bool("version", false, "print queenctl's version and exit")
	if err := top.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printHelp(stdout, mainUsage, top, nil)
			return errHelpShown
		}
		return usagef("%v (see queenctl --help)", err)
	}
	rest := top.Args()
	if *showVersion || len(rest) == 1 && rest[0] == "version" {
		fmt.Fprintln(stdout, "queenctl", buildVersion())
		return nil
	}
	if len(rest) == 0 {
		fmt.Fprint(stderr, mainUsage)
		return usagef("no command given")
	}
	c, name, rest, err := findCommand(commands(), rest[0], rest[1:], top, g, stdout)
	if err != nil {
		return err
	}
	return runCommand(ctx, c, name, rest, g, stdin, stdout, stderr)
}

// findCommand finds the command name (with its subcommand, if it has
// subs) that rest is the arguments of; "help" names the command it asks
// about, whose arguments become --help.
func findCommand(cmds []*command, name string, rest []string, top *flag.FlagSet, g *globals, stdout io.Writer) (*command, string, []string, error) {
	if name == "help" {
		if len(rest) == 0 {
			printHelp(stdout, mainUsage, top, nil)
			return nil, "", nil, errHelpShown
		}
		// "help timer schedule" is "timer schedule --help".
		topic := rest
		name, rest = topic[0], []string{"--help"}
		if c := findNamed(cmds, name); c != nil && c.subs != nil && len(topic) > 1 {
			rest = []string{topic[1], "--help"}
		}
	}
	c := findNamed(cmds, name)
	if c == nil {
		return nil, "", nil, usagef("unknown command %q (see queenctl --help)", name)
	}
	if c.subs != nil {
		return pickSub(c, name, rest, g, stdout)
	}
	return c, name, rest, nil
}

// runCommand parses command c's flags (its own and the global ones, among
// its arguments rest) and runs it.
func runCommand(ctx context.Context, c *command, name string, rest []string, g *globals, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("queenctl " + name)
	runCmd := c.setup(fs)
	var own []string
	fs.VisitAll(func(f *flag.Flag) { own = append(own, f.Name) })
	g.register(fs)
	pos, err := parseInterspersed(fs, rest)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printHelp(stdout, c.usage, fs, own)
			return errHelpShown
		}
		return usagef("%s: %v (see queenctl %s --help)", name, err, name)
	}
	if err := g.validate(); err != nil {
		return err
	}
	// NATS reports a permissions violation to the connection, not to the
	// request it refused: it ends the run at once, with that cause.
	ctx, refuse := context.WithCancelCause(ctx)
	defer refuse(nil)
	s := &session{g: g, stdin: stdin, stdout: stdout, stderr: stderr, refuse: refuse}
	defer s.close()
	err = runCmd(ctx, s, pos)
	var re *admin.RefusedError
	if errors.As(context.Cause(ctx), &re) {
		return re
	}
	return err
}

// command is one subcommand. setup registers its flags on a fresh flag
// set and returns its body, which reads them: no flag state is shared
// between runs (tests run many at once). A command with subs (timer) has
// no body of its own: its first argument names one of them.
type command struct {
	name  string
	usage string
	setup func(fs *flag.FlagSet) runFunc
	subs  []*command // in the order the usage lists them
}

// commands is queenctl's command table, in the order the main help lists
// them; built afresh for each run, so nothing of it is shared.
func commands() []*command {
	return []*command{
		{name: "apply", usage: applyUsage, setup: setupApply},
		{name: "configure", usage: configureUsage, setup: setupConfigure},
		{name: "get", usage: getUsage, setup: setupGet},
		{name: "delete", usage: deleteUsage, setup: setupDelete},
		{name: "create", usage: createUsage, setup: setupCreate},
		{name: "seek", usage: seekUsage, setup: setupSeek},
		{name: "purge", usage: purgeUsage, setup: setupPurge},
		{name: "read", usage: readUsage, setup: setupRead},
		{name: "explain", usage: explainUsage, setup: setupExplain},
		{name: "push", usage: pushUsage, setup: setupPush},
		{name: "consume", usage: consumeUsage, setup: setupConsume},
		{name: "dlq", usage: dlqUsage, subs: []*command{
			{name: "list", usage: dlqListUsage, setup: setupDLQList},
			{name: "redrive", usage: dlqRedriveUsage, setup: setupDLQRedrive},
		}},
		{name: "status", usage: statusUsage, setup: setupStatus},
		{name: "timer", usage: timerUsage, subs: []*command{
			{name: "schedule", usage: timerScheduleUsage, setup: setupTimerSchedule},
			{name: "cancel", usage: timerCancelUsage, setup: setupTimerCancel},
			{name: "list", usage: timerListUsage, setup: setupTimerList},
		}},
	}
}

// findNamed is the command of cmds called name, nil if there is none.
func findNamed(cmds []*command, name string) *command {
	for _, c := range cmds {
		if c.name == name {
			return c
		}
	}
	return nil
}

// pickSub finds the subcommand of c that rest names first ("timer
// schedule ..."); global flags may come before it. It returns the
// subcommand, its full name and its arguments.
func pickSub(c *command, name string, rest []string, g *globals, stdout io.Writer) (*command, string, []string, error) {
	fs := newFlagSet("queenctl " + name)
	g.register(fs)
	if err := fs.Parse(rest); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printHelp(stdout, c.usage, fs, nil)
			return nil, "", nil, errHelpShown
		}
		return nil, "", nil, usagef("%s: %v (see queenctl %s --help)", name, err, name)
	}
	rest = fs.Args()
	var subs []string
	for _, sub := range c.subs {
		subs = append(subs, "'"+name+" "+sub.name+"'")
	}
	which := strings.Join(subs[:len(subs)-1], ", ") + " or " + subs[len(subs)-1]
	if len(rest) == 0 {
		return nil, "", nil, usagef("%s: use %s (see queenctl %s --help)", name, which, name)
	}
	sub := findNamed(c.subs, rest[0])
	if sub == nil {
		return nil, "", nil, usagef("%s: unknown subcommand %q: use %s (see queenctl %s --help)", name, rest[0], which, name)
	}
	return sub, name + " " + rest[0], rest[1:], nil
}

// runFunc runs a command with its positional arguments.
type runFunc func(ctx context.Context, s *session, args []string) error
