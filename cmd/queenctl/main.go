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
	"github.com/queengate/queengate/internal/ctl/cli"
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
	if err == nil || errors.Is(err, cli.ErrHelpShown) {
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
		ue *cli.UsageError
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
	top := cli.NewFlagSet("queenctl")
	g.register(top)
	showVersion := top.Bool("version", false, "print queenctl's version and exit")
	if err := top.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			cli.PrintHelp(stdout, mainUsage, top, nil)
			return cli.ErrHelpShown
		}
		return cli.Usagef("%v (see queenctl --help)", err)
	}
	rest := top.Args()
	if *showVersion || len(rest) == 1 && rest[0] == "version" {
		fmt.Fprintln(stdout, "queenctl", buildVersion())
		return nil
	}
	if len(rest) == 0 {
		fmt.Fprint(stderr, mainUsage)
		return cli.Usagef("no command given")
	}
	p := &cli.Program[runFunc]{Name: "queenctl", Usage: mainUsage, Commands: commands(), Globals: g.register}
	c, name, rest, err := p.Find(top, rest, stdout)
	if err != nil {
		return err
	}
	runCmd, pos, err := p.Parse(c, name, rest, stdout)
	if err != nil {
		return err
	}
	return runCommand(ctx, runCmd, pos, g, stdin, stdout, stderr)
}

// runCommand runs a command's body with its positional arguments pos,
// once the global flags are checked.
func runCommand(ctx context.Context, runCmd runFunc, pos []string, g *globals, stdin io.Reader, stdout, stderr io.Writer) error {
	if err := g.validate(); err != nil {
		return err
	}
	// NATS reports a permissions violation to the connection, not to the
	// request it refused: it ends the run at once, with that cause.
	ctx, refuse := context.WithCancelCause(ctx)
	defer refuse(nil)
	s := &session{g: g, stdin: stdin, stdout: stdout, stderr: stderr, refuse: refuse}
	defer s.close()
	err := runCmd(ctx, s, pos)
	var re *admin.RefusedError
	if errors.As(context.Cause(ctx), &re) {
		return re
	}
	return err
}

// command is one of queenctl's commands: setup registers its flags and
// returns its body.
type command = cli.Command[runFunc]

// commands is queenctl's command table, in the order the main help lists
// them; built afresh for each run, so nothing of it is shared.
func commands() []*command {
	return []*command{
		{Name: "apply", Usage: applyUsage, Setup: setupApply},
		{Name: "configure", Usage: configureUsage, Setup: setupConfigure},
		{Name: "get", Usage: getUsage, Setup: setupGet},
		{Name: "delete", Usage: deleteUsage, Setup: setupDelete},
		{Name: "create", Usage: createUsage, Setup: setupCreate},
		{Name: "seek", Usage: seekUsage, Setup: setupSeek},
		{Name: "purge", Usage: purgeUsage, Setup: setupPurge},
		{Name: "read", Usage: readUsage, Setup: setupRead},
		{Name: "explain", Usage: explainUsage, Setup: setupExplain},
		{Name: "push", Usage: pushUsage, Setup: setupPush},
		{Name: "consume", Usage: consumeUsage, Setup: setupConsume},
		{Name: "dlq", Usage: dlqUsage, Subs: []*command{
			{Name: "list", Usage: dlqListUsage, Setup: setupDLQList},
			{Name: "redrive", Usage: dlqRedriveUsage, Setup: setupDLQRedrive},
		}},
		{Name: "status", Usage: statusUsage, Setup: setupStatus},
		{Name: "timer", Usage: timerUsage, Subs: []*command{
			{Name: "schedule", Usage: timerScheduleUsage, Setup: setupTimerSchedule},
			{Name: "cancel", Usage: timerCancelUsage, Setup: setupTimerCancel},
			{Name: "list", Usage: timerListUsage, Setup: setupTimerList},
		}},
	}
}

// runFunc runs a command with its positional arguments.
type runFunc func(ctx context.Context, s *session, args []string) error
