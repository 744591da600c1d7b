// Command task is this repository's task runner, `go tool task`: go-task
// (the pinned release, see Taskfile.yml) with one change, what a signal
// does.
//
// go-task's own command takes SIGINT and SIGTERM only to print that it
// got them: it relies on the terminal signalling the whole process group,
// so a SIGTERM sent to it alone (by a supervisor, by docker stop, or
// relayed by `go tool`) reached none of its commands, and the gateway
// of `go tool task run` served on. Here the first SIGINT or SIGTERM
// cancels the running tasks: go-task's shell then sends each running
// command SIGINT, and SIGKILL 15 seconds later if it is still there,
// and task exits once they have. The third signal exits at once, as
// go-task's does.
//
// The flags are go-task's usual ones (--list, --dir, --taskfile,
// --verbose, --silent, --dry, --force, --summary, --parallel, --yes,
// --exit-code, --version); CLI_ARGS come after "--".
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/go-task/task/v3"
	"github.com/go-task/task/v3/args"
	taskerrors "github.com/go-task/task/v3/errors"
	"github.com/go-task/task/v3/taskfile/ast"
	"github.com/spf13/pflag"
	"mvdan.cc/sh/v3/syntax"
)

// flags are the command line.
type flags struct {
	list, listAll, json, noStatus        bool
	silent, verbose, force, dry, summary bool
	parallel, yes, exitCode              bool
	version, help                        bool
	dir, taskfile                        string
	calls                                []string
	cliArgs                              string // after "--", quoted
}

func main() {
	f, err := parseFlags(os.Args[1:])
	if err == nil {
		err = run(f)
	}
	os.Exit(exitCode(err, f.exitCode))
}

func parseFlags(argv []string) (flags, error) {
	var f flags
	fs := pflag.NewFlagSet("task", pflag.ContinueOnError)
	fs.BoolVarP(&f.list, "list", "l", false, "Lists tasks with description of current Taskfile.")
	fs.BoolVarP(&f.listAll, "list-all", "a", false, "Lists tasks with or without a description.")
	fs.BoolVarP(&f.json, "json", "j", false, "Formats task list as JSON.")
	fs.BoolVar(&f.noStatus, "no-status", false, "Ignore status when listing tasks as JSON.")
	fs.BoolVarP(&f.silent, "silent", "s", false, "Disables echoing.")
	fs.BoolVarP(&f.verbose, "verbose", "v", false, "Enables verbose mode.")
	fs.BoolVarP(&f.force, "force", "f", false, "Forces execution even when the task is up-to-date.")
	fs.BoolVarP(&f.dry, "dry", "n", false, "Compiles and prints tasks in the order that they would be run, without executing them.")
	fs.BoolVar(&f.summary, "summary", false, "Show summary about a task.")
	fs.BoolVarP(&f.parallel, "parallel", "p", false, "Executes tasks provided on command line in parallel.")
	fs.BoolVarP(&f.yes, "yes", "y", false, `Assume "yes" as answer to all prompts.`)
	fs.BoolVarP(&f.exitCode, "exit-code", "x", false, "Pass-through the exit code of the task command.")
	fs.BoolVar(&f.version, "version", false, "Show Task version.")
	fs.BoolVarP(&f.help, "help", "h", false, "Shows Task usage.")
	fs.StringVarP(&f.dir, "dir", "d", "", "Sets directory of execution.")
	fs.StringVarP(&f.taskfile, "taskfile", "t", "", `Choose which Taskfile to run. Defaults to "Taskfile.yml".`)
	fs.Usage = func() {
		fmt.Fprintln(os.Stderr, "Usage: go tool task [flags...] [task...] [-- CLI_ARGS...]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(argv); err != nil {
		return f, err
	}
	f.calls = fs.Args()
	if dash := fs.ArgsLenAtDash(); dash >= 0 {
		f.calls = fs.Args()[:dash]
		quoted, err := quoteAll(fs.Args()[dash:])
		if err != nil {
			return f, err
		}
		f.cliArgs = quoted
	}
	if f.help {
		fs.Usage()
	}
	return f, nil
}

// quoteAll quotes CLI_ARGS for the Taskfile's shell, as go-task does.
func quoteAll(argv []string) (string, error) {
	quoted := make([]string, len(argv))
	for i, a := range argv {
		q, err := syntax.Quote(a, syntax.LangBash)
		if err != nil {
			return "", err
		}
		quoted[i] = q
	}
	return strings.Join(quoted, " "), nil
}

func run(f flags) error {
	switch {
	case f.help:
		return nil
	case f.version:
		fmt.Println("Task version:", goTaskVersion(), "(with SIGTERM stopping the running tasks)")
		return nil
	}
	e := &task.Executor{Dir: f.dir, Entrypoint: f.taskfile, ForceAll: f.force, Verbose: f.verbose, Silent: f.silent,
		AssumeYes: f.yes, Dry: f.dry, Summary: f.summary, Parallel: f.parallel, Color: os.Getenv("NO_COLOR") == "",
		Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}
	list := task.NewListOptions(f.list, f.listAll, f.json, f.noStatus)
	if err := list.Validate(); err != nil {
		return err
	}
	if err := e.Setup(); err != nil {
		return err
	}
	if list.ShouldListTasks() {
		return listTasks(e, list, f)
	}
	calls, globals := args.Parse(f.calls...)
	if len(calls) == 0 {
		calls = append(calls, &ast.Call{Task: "default"})
	}
	globals.Set("CLI_ARGS", ast.Var{Value: f.cliArgs})
	globals.Set("CLI_FORCE", ast.Var{Value: f.force})
	globals.Set("CLI_SILENT", ast.Var{Value: f.silent})
	globals.Set("CLI_VERBOSE", ast.Var{Value: f.verbose})
	e.Taskfile.Vars.Merge(globals, nil)
	ctx, stop := stopOnSignal()
	defer stop()
	err := e.Run(ctx, calls...)
	if ctx.Err() != nil && isCancelled(err) {
		return nil // stopped as asked; the commands' own exit was clean or forced
	}
	return err
}

func listTasks(e *task.Executor, list task.ListOptions, f flags) error {
	if f.silent {
		return e.ListTaskNames(f.listAll)
	}
	found, err := e.ListTasks(list)
	if err == nil && !found {
		err = errors.New("no tasks with a description; --list-all lists them all")
	}
	return err
}

// stopOnSignal is a context cancelled by the first SIGINT or SIGTERM;
// the third exits at once.
func stopOnSignal() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 3)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		for i := 1; ; i++ {
			sig, ok := <-ch
			if !ok {
				return
			}
			if i == 3 {
				fmt.Fprintf(os.Stderr, "task: signal received for the third time: %q: exiting now\n", sig)
				os.Exit(taskerrors.CodeUnknown)
			}
			if i == 1 {
				fmt.Fprintf(os.Stderr, "task: signal received: %q: stopping the running tasks\n", sig)
			}
			cancel()
		}
	}()
	return ctx, func() { signal.Stop(ch); close(ch); cancel() }
}

// isCancelled says whether err is the running tasks' cancellation.
func isCancelled(err error) bool {
	if err == nil {
		return true
	}
	var run *taskerrors.TaskRunError
	if errors.As(err, &run) {
		err = run.Err
	}
	return errors.Is(err, context.Canceled)
}

// exitCode is go-task's exit code for err.
func exitCode(err error, passThrough bool) int {
	if err == nil {
		return taskerrors.CodeOk
	}
	if errors.Is(err, pflag.ErrHelp) {
		return taskerrors.CodeOk
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "task: ") { // go-task's errors say it themselves
		msg = "task: " + msg
	}
	fmt.Fprintln(os.Stderr, msg)
	var run *taskerrors.TaskRunError
	if passThrough && errors.As(err, &run) {
		return run.TaskExitCode()
	}
	var te taskerrors.TaskError
	if errors.As(err, &te) {
		return te.Code()
	}
	return taskerrors.CodeUnknown
}

// goTaskVersion is the go-task module this command is built with.
func goTaskVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			if m.Path == "github.com/go-task/task/v3" {
				return m.Version
			}
		}
	}
	return "unknown"
}
