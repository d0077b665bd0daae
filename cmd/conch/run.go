package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/conch-dev/conch/tasks"
	"github.com/conch-dev/conch/tools"
)

const runUsage = `Usage: conch run [flags] [--] <command>...

Run one command through conch's bash tool, exactly as a model would, and
print what the model would see. The words after the flags are joined with
spaces into one bash command; quote it to keep pipes and redirections for
bash: conch run -- 'ls | wc -l'.

The session id is "run"; the command runs in --workdir, resolved against
--cwd (default: the current directory). --timeout-ms is its timeout.

Output (stdout):
  default       the model-facing text, plus a newline if it lacks one
  --json        the structured value, as indented JSON ({"isError": true,
                "text": …} for a tool error)
  --present     how an editor draws the call and its result, as indented
                JSON {"call": …, "result": …} (null: no view)
  --background  start the command as a background task and follow its
                output to the end, then print its final status line; with
                --json or --present the start call is shown and the task is
                awaited silently. A call moved to the background by
                --yield-ms is followed the same way.

Exit status:
  N       the command exited with code N
  128+S   the command was killed by signal number S (143: SIGTERM)
  124     the command timed out (as with coreutils timeout)
  125     a tool error: conch could not run the command (missing workdir,
          spawn failure, …)
  130     conch run was interrupted (SIGINT or SIGTERM); the command is killed
  141     stdout was closed while following a background task (as SIGPIPE
          would); the task is killed
  2       a usage error (bad flag or value, no command)

Flags:
`

// runDescription is the bash tool's description argument of conch run.
const runDescription = "Run from the conch CLI"

// Exit statuses of conch run besides the command's own.
const (
	exitTimedOut    = 124
	exitToolError   = 125
	exitInterrupted = 130
	exitUsage       = 2
	exitBrokenPipe  = 128 + 13 // stdout closed while following a task
)

// runSession is the session of conch run.
var runSession = tools.Session{ID: "run"}

// runCommand is `conch run`.
func runCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("conch run", flag.ContinueOnError)
	var c config
	c.addFlags(fs, 0, slog.LevelWarn)
	workdir := fs.String("workdir", "", "working directory of the command, relative to --cwd")
	asJSON := fs.Bool("json", false, "print the structured value instead of the text")
	present := fs.Bool("present", false, "print the presentation cards of the call and its result")
	background := fs.Bool("background", false, "run as a background task and follow its output")
	set, code, ok := parseFlags(fs, args, runUsage, stdout, stderr)
	if !ok {
		return code
	}
	c.rules = set.rules
	if fs.NArg() == 0 {
		fmt.Fprintf(stderr, "conch run: no command\nRun 'conch run --help' for usage.\n")
		return exitUsage
	}
	if *asJSON && *present {
		fmt.Fprintf(stderr, "conch run: --json and --present cannot be combined\n")
		return exitUsage
	}
	log := c.newLogger(stderr)
	c.configFile = set.file
	c.firstOwner = runSession.ID
	st, err := c.build(log)
	// An init started ahead and not taken by the stack is not needed.
	endPrestart()
	if err != nil {
		fmt.Fprintf(stderr, "conch run: %v\n", err)
		return exitUsage
	}
	st.logStart(log, "run", set)
	defer st.close()
	// A closed stdout (conch run … | head -1) must not kill conch with
	// SIGPIPE before it has cleaned up: with the signal handled the write
	// fails instead. (Handled, unlike ignored, signals are reset for the
	// command.)
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)

	callArgs := map[string]any{"command": strings.Join(fs.Args(), " "), "description": runDescription}
	if *workdir != "" {
		callArgs["workdir"] = *workdir
	}
	if *background {
		callArgs["run_in_background"] = true
	}
	raw, _ := json.Marshal(callArgs)
	r := st.tools.Call(ctx, runSession, tools.NameBash, raw, nil)

	switch {
	case *asJSON:
		var v any = r.Value
		if r.IsError {
			v = map[string]any{"isError": true, "text": r.Text}
		}
		printJSON(stdout, v)
	case *present:
		var out struct {
			Call   *tools.View `json:"call"`
			Result *tools.View `json:"result"`
		}
		if v, ok := tools.PresentCall(tools.NameBash, raw); ok {
			out.Call = &v
		}
		if v, ok := tools.PresentResult(tools.NameBash, raw, []string{r.Text}, r.IsError); ok {
			out.Result = &v
		}
		printJSON(stdout, out)
	default:
		printText(stdout, r.Text)
	}

	quiet := *asJSON || *present
	// An interrupted task gets SIGTERM, SIGKILL after the grace, and
	// then at most the grace again to drain its pipes.
	settle := 2*c.graceMs.millis() + time.Second
	switch v := r.Value.(type) {
	case tools.BackgroundValue:
		return follow(ctx, st.tools, v.TaskID, settle, quiet, stdout, stderr)
	case tools.YieldedValue:
		return follow(ctx, st.tools, v.TaskID, settle, quiet, stdout, stderr)
	case tools.ForegroundValue:
		return foregroundStatus(v)
	}
	if ctx.Err() != nil {
		return exitInterrupted
	}
	return exitToolError
}

func printText(w io.Writer, text string) {
	if !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	io.WriteString(w, text)
}

func printJSON(w io.Writer, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil { // cannot happen for the tools' values
		b = []byte(strconv.Quote(err.Error()))
	}
	w.Write(append(b, '\n'))
}

// followPoll is how long one task_output wait lasts while following: the
// output appears at this pace.
const followPoll = 200

// follow reads task id with task_output until it settles, printing each
// delta (unless quiet) and then its status line, and returns the exit
// status its outcome maps to.
//
// An interruption (ctx done) kills the task and waits up to settle for it
// to end before the last read.
func follow(ctx context.Context, ts *tools.Toolset, id string, settle time.Duration, quiet bool, stdout, stderr io.Writer) int {
	args, _ := json.Marshal(map[string]any{"task_id": id, "wait": true, "timeout_ms": followPoll})
	kill, _ := json.Marshal(map[string]any{"task_id": id, "reason": "conch run interrupted"})
	final, _ := json.Marshal(map[string]any{"task_id": id, "wait": true, "timeout_ms": settle.Milliseconds()})
	last := byte('\n')
	for {
		r := ts.Call(ctx, runSession, tools.NameTaskOutput, args, nil)
		v, ok := r.Value.(tools.TaskOutputValue)
		if r.IsError || !ok {
			if ctx.Err() != nil {
				// Kill the task and show what it printed up to its end
				// (while dying included): read only once it has settled,
				// when its pipes are drained, or after settle at most.
				bg := context.WithoutCancel(ctx)
				ts.Call(bg, runSession, tools.NameTaskKill, kill, nil)
				r = ts.Call(bg, runSession, tools.NameTaskOutput, final, nil)
				if v, ok := r.Value.(tools.TaskOutputValue); ok && !quiet {
					io.WriteString(stdout, v.Output)
				}
				return exitInterrupted
			}
			fmt.Fprintf(stderr, "conch run: %s\n", r.Text)
			return exitToolError
		}
		if !quiet && v.Output != "" {
			if _, err := io.WriteString(stdout, v.Output); err != nil {
				return exitBrokenPipe // nobody reads any more: the task is killed
			}
			last = v.Output[len(v.Output)-1]
		}
		st := tasks.Status(v.Status)
		if !st.Settled() {
			continue
		}
		if !quiet {
			if last != '\n' {
				io.WriteString(stdout, "\n")
			}
			fmt.Fprintln(stdout, tasks.Outcome{Status: st, Detail: v.Detail}.StatusLine())
		}
		return outcomeStatus(v.TaskState)
	}
}

// foregroundStatus maps a foreground result to conch run's exit status.
func foregroundStatus(v tools.ForegroundValue) int {
	switch {
	case v.TimedOut:
		return exitTimedOut
	case v.Aborted:
		return exitInterrupted
	case v.Signal != nil:
		return signalStatus(*v.Signal)
	case v.ExitCode != nil:
		return *v.ExitCode
	}
	return exitToolError
}

// outcomeStatus maps a settled task's state to conch run's exit status,
// as foregroundStatus maps a foreground result.
func outcomeStatus(v tools.TaskState) int {
	switch {
	case v.TimedOut:
		return exitTimedOut
	case v.Signal != "":
		return signalStatus(v.Signal)
	case v.ExitCode != nil:
		return *v.ExitCode
	case tasks.Status(v.Status) == tasks.StatusCompleted:
		return 0
	}
	return exitToolError
}

// signalStatus is 128 + the signal's number, as shells report it.
func signalStatus(name string) int {
	if n := unix.SignalNum(name); n > 0 {
		return 128 + int(n)
	}
	return exitToolError
}
