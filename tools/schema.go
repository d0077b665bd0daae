package tools

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"
)

// paramBackground is the bash parameter a deployment may disable.
const paramBackground = "run_in_background"

// Tool names.
const (
	NameBash       = "bash"
	NameTaskOutput = "task_output"
	NameTaskList   = "task_list"
	NameTaskKill   = "task_kill"
)

// Tool describes one model-facing tool: what a transport lists.
type Tool struct {
	Name        string
	Title       string
	Description string
	// InputSchema and OutputSchema are JSON Schema objects, kept as bytes
	// so that the property order a model sees is ours.
	InputSchema  json.RawMessage
	OutputSchema json.RawMessage
	// ReadOnly and Destructive are hints for clients that show them.
	ReadOnly, Destructive bool
}

// withHostParam adds the host parameter, last, to a bash input schema.
func withHostParam(schema json.RawMessage, names []string) json.RawMessage {
	enum, _ := json.Marshal(names)
	prop := `,"host":{"type":"string","enum":` + string(enum) +
		`,"description":"Where the command runs: local (this machine, the default) or one of the configured remote hosts. On a remote host, workdir is a path there (default: the host's configured directory, else the remote user's home)."}`
	i := strings.Index(string(schema), `},"required"`)
	return json.RawMessage(string(schema[:i]) + prop + string(schema[i:]))
}

// bashLimits are the numbers the bash description states, as configured.
type bashLimits struct {
	// DefaultTimeout and MaxTimeout are the executor's; 0 when it did not
	// say (the sentence is then left out).
	DefaultTimeout, MaxTimeout time.Duration
	Yield                      time.Duration // 0: off
	Budget                     int           // bytes of a result
	Background                 bool
	TTY                        bool     // tty is offered
	Notes                      []string // Options.BashNotes
	// Sandbox is the sandbox the commands run in (nil: the description
	// says nothing of one); Escalation, that a command may leave it with
	// the user's yes (outside_sandbox is offered).
	Sandbox    *Sandbox
	Escalation bool
	// Scrubbed names the variables the executor removes from commands'
	// environment (Options.Scrubbed).
	Scrubbed []string
}

// bashDescription is the bash tool's description: what a model must know
// to use it well, with the numbers of this deployment.
func bashDescription(l bashLimits) string {
	ms := func(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) + " ms" }
	var b strings.Builder
	b.WriteString("Run a bash command and return its output. " +
		"Each call is a fresh `bash -c` process: no state (working directory, variables, functions) is kept between calls, so pass `workdir` instead of running `cd`. " +
		"A non-zero exit is reported as `[exit code: N]` at the end of the result, a timeout as `[timed out after Nms]`, a signal as `[killed by signal: SIG]`. ")
	if l.DefaultTimeout > 0 && l.MaxTimeout > 0 {
		b.WriteString("The timeout is " + ms(l.DefaultTimeout) + " unless `timeoutMs` sets another, at most " + ms(l.MaxTimeout) + ". ")
	}
	b.WriteString("A result holds at most " + strconv.Itoa(l.Budget) + " bytes: longer output keeps its start and its end, " +
		"joined by a line that says how much was left out and names the file holding the full output. ")
	if !l.Background {
		b.WriteString("Background execution is not available; long-running commands must finish within the timeout.")
		return withNotes(b.String(), l.Notes) + sandboxParagraph(l)
	}
	b.WriteString("Set `run_in_background: true` for long-running commands (servers, watchers, long builds): the call returns a task id at once; read the task's output with `task_output` and stop it with `task_kill`.")
	if l.Yield > 0 {
		b.WriteString(" A call still running after " + ms(l.Yield) + " moves to a background task by itself and returns its output so far; its timeout still applies.")
	}
	if l.TTY {
		b.WriteString(" Set `tty: true` for a program that needs a terminal (a prompt, a REPL, a full-screen program): it runs on a 120x40 terminal, " +
			"and when it waits for input (no output for " + ms(InputIdle) + ") the call returns the screen so far and moves it to a background task; " +
			"type into it with `task_input`, read it with `task_output`, stop it with `task_kill`.")
	}
	return withNotes(b.String(), l.Notes) + sandboxParagraph(l)
}

// maxScrubbedNames bounds the variable names the description lists.
const maxScrubbedNames = 30

// sandboxParagraph is what a model must know before it trips on the
// sandbox (docs/tools.md#description): the mode and the network, where
// commands may write and what stays read-only there, what a `[sandbox:
// …]` line means, how to ask to leave the sandbox, and which variables
// commands do not get; after a blank line, "" when there is nothing to
// say.
func sandboxParagraph(l bashLimits) string {
	var b strings.Builder
	if sb := l.Sandbox; sb != nil {
		mode, network := sb.Mode, sb.Network
		if mode == "" {
			mode = "workspace-write"
		}
		if network == "" {
			network = "on"
		}
		b.WriteString("Commands run in a sandbox (mode " + mode + ", network " + network + "). ")
		if network == "off" {
			b.WriteString("No connection reaches any address, 127.0.0.1 included. ")
		}
		switch mode {
		case "full-access":
			b.WriteString("They may write anywhere the user may. ")
		case "read-only":
			b.WriteString("They may write only in the temp directories (" + strings.Join(sb.Writable, ", ") + "); everything else is read-only. ")
		default:
			where := "the session's working directory (the workspace)"
			if len(sb.Writable) > 0 {
				where += " and in " + strings.Join(sb.Writable, ", ") + " (temp directories and caches)"
			}
			b.WriteString("They may write only in " + where + "; everything else is read-only, " +
				"and inside them `.git/hooks`, `.git/config` and conch's own files stay read-only too. ")
		}
		b.WriteString("A `[sandbox: …]` line after the output names an operation the sandbox denied: the command failed because of it, and running it again the same way fails again. ")
		if l.Escalation {
			b.WriteString("When a command must do what the sandbox denies, set `outside_sandbox: true` and say why in `justification`: the user is asked first, and it runs outside the sandbox only with their yes.")
		} else {
			b.WriteString("Commands cannot be run outside the sandbox in this deployment.")
		}
	}
	if len(l.Scrubbed) > 0 {
		if b.Len() > 0 {
			b.WriteString(" ")
		}
		names := l.Scrubbed
		more := ""
		if len(names) > maxScrubbedNames {
			names, more = names[:maxScrubbedNames], " and "+strconv.Itoa(len(names)-maxScrubbedNames)+" more"
		}
		b.WriteString("These variables of the server's environment are not passed to commands (a tool that needs one fails as if logged out): " +
			strings.Join(names, ", ") + more + "; the user can pass one through with `--pass-env NAME`.")
	}
	if b.Len() == 0 {
		return ""
	}
	return "\n\n" + b.String()
}

// withNotes is a description followed by the deployment's notes, each a
// sentence of its own.
func withNotes(desc string, notes []string) string {
	for _, n := range notes {
		desc += " " + n
	}
	return desc
}

// bashPrompt is the bash section for hosts that build system prompts.
const bashPrompt = "Check the [exit code: N] marker on every bash result; investigate failures before moving on."

// tasksPrompt is the task tools' section for hosts that build system
// prompts.
const tasksPrompt = "Track every background task id you start. When a task finishes you are told so with the session's next tool result, so do not busy-poll it; " +
	"to wait for a task now, call task_output with wait: true. " +
	"Before a final answer, collect the output of tasks that still matter with task_output, and stop those that stopped mattering with task_kill."

const bashInputProperties = `"command":{"type":"string","description":"The bash command to execute."},` +
	`"description":{"type":"string","description":"A 5-10 word active-voice summary of what the command does, shown in the UI (e.g. \"Run the unit tests\"). It never changes execution."},` +
	`"timeoutMs":{"type":"number","description":"Timeout in milliseconds. The deployment's default applies when omitted, and its maximum caps it."},` +
	`"workdir":{"type":"string","description":"Working directory for this call. Relative paths resolve against the session's working directory; ~ is the home directory."}`

// The properties of outside_sandbox and justification, which bash offers
// with an executor outside the sandbox (docs/sandbox.md#escalation).
const (
	outsideProperty       = `{"type":"boolean","description":"Run this command outside the sandbox. The user is asked first, with your justification, and it runs only with their yes: use it only for what the sandbox denies."}`
	justificationProperty = `{"type":"string","description":"Why the command must run outside the sandbox, shown to the user in the question. Required with outside_sandbox."}`
)

var (
	bashInputSchema = json.RawMessage(`{"type":"object","properties":{` + bashInputProperties +
		`,"run_in_background":{"type":"boolean","description":"Start the command as a background task and return its id at once."}` +
		`},"required":["command","description"],"additionalProperties":false}`)
	bashInputSchemaNoBackground = json.RawMessage(`{"type":"object","properties":{` + bashInputProperties +
		`},"required":["command","description"],"additionalProperties":false}`)

	// streamSchema is StreamValue: the facts of a stream the value's text
	// shows (the text itself is not repeated).
	streamSchema = `{"type":"object","properties":{"truncated":{"type":"boolean"},"spillPath":{"type":"string"},"bytes":{"type":"integer"},"lines":{"type":"integer"}},"required":["truncated","bytes","lines"]}`

	// textProperty is the first member of every tool's value: the whole
	// text of the result, notices included (docs/tools.md).
	textProperty = `"text":{"type":"string","description":"The result as the model reads it: the output and its markers, then each completion notice after a blank line."}`

	// sandboxSchema is shell.SandboxReport: the sandbox a command ran
	// under and what it denied (docs/sandbox.md).
	sandboxSchema = `{"type":"object","properties":{` +
		`"mode":{"type":"string","enum":["read-only","workspace-write","full-access"]},` +
		`"network":{"type":"string","enum":["on","public","allowlist","off"]},` +
		`"denied":{"type":"array","items":{"type":"object","properties":{"path":{"type":"string"},"host":{"type":"string"},"port":{"type":"integer"},"op":{"type":"string","enum":["write","read","network","connect"]},"reason":{"type":"string"}},"required":["op"]}}` +
		`},"required":["mode","network","denied"]}`

	bashOutputSchema = json.RawMessage(`{"type":"object","properties":{` + textProperty + `,` +
		`"kind":{"type":"string","enum":["foreground","background","yielded"]},` +
		`"exitCode":{"type":["integer","null"]},` +
		`"signal":{"type":["string","null"]},` +
		`"timedOut":{"type":"boolean"},` +
		`"aborted":{"type":"boolean"},` +
		`"timeoutMs":{"type":"integer"},` +
		`"stdout":` + streamSchema + `,` +
		`"stderr":` + streamSchema + `,` +
		`"taskId":{"type":"string"},` +
		`"yieldedAfterMs":{"type":"integer"},` +
		`"sandbox":` + sandboxSchema +
		`},"required":["text","kind"]}`)

	// taskStateProperties are TaskState's fields in an output schema.
	taskStateProperties = `"status":{"type":"string"},"detail":{"type":"string"},"exitCode":{"type":"integer"},"signal":{"type":"string"},` +
		`"timedOut":{"type":"boolean"},"timeoutMs":{"type":"integer"},"elapsedMs":{"type":"integer"},"leftRunning":{"type":"integer"}`

	taskOutputOutputSchema = json.RawMessage(`{"type":"object","properties":{` + textProperty + `,` +
		`"taskId":{"type":"string"},` + taskStateProperties + `,"sandbox":` + sandboxSchema +
		`},"required":["text","taskId","status","elapsedMs"]}`)

	taskListInputSchema  = json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`)
	taskListOutputSchema = json.RawMessage(`{"type":"object","properties":{` + textProperty + `,"tasks":{"type":"array","items":{"type":"object","properties":{` +
		`"id":{"type":"string"},"kind":{"type":"string"},` + taskStateProperties + `,"label":{"type":"string"}` +
		`},"required":["id","kind","status","elapsedMs","label"]}}},"required":["text","tasks"]}`)

	taskKillInputSchema = json.RawMessage(`{"type":"object","properties":{` +
		`"task_id":{"type":"string","description":"The id of the background task to stop."},` +
		`"reason":{"type":"string","description":"Why the task is being stopped (for logs)."}` +
		`},"required":["task_id"],"additionalProperties":false}`)
	// The parameter names, read from the schemas when first needed:
	// not at every start of the binary (inits and agents included).
	bashParams             = lazyParams(bashInputSchema)
	bashParamsNoBackground = lazyParams(bashInputSchemaNoBackground)
	taskOutputParams       = lazyParams(taskOutputInputSchema(0, 0))
	taskListParams         = lazyParams(taskListInputSchema)
	taskKillParams         = lazyParams(taskKillInputSchema)

	taskKillOutputSchema = json.RawMessage(`{"type":"object","properties":{` + textProperty + `,` +
		`"taskId":{"type":"string"},` + taskStateProperties + `,"alreadyFinished":{"type":"boolean"},"killedLeftovers":{"type":"integer"}` +
		`},"required":["text","taskId","status","elapsedMs","alreadyFinished"]}`)
)

// taskOutputInputSchema is task_output's input schema; timeout_ms states
// the wait's default and cap.
func taskOutputInputSchema(defaultWait, maxWait time.Duration) json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{` +
		`"task_id":{"type":"string","description":"The id of the background task, e.g. bash-1."},` +
		`"wait":{"type":"boolean","description":"Block until the task finishes or timeout_ms passes."},` +
		`"timeout_ms":{"type":"number","description":"How long a wait may block, in milliseconds (default ` + millis(defaultWait) + `, max ` + millis(maxWait) + `)."}` +
		`},"required":["task_id"],"additionalProperties":false}`)
}

// taskOutputDescription is task_output's description; it states the
// wait's default and cap.
func taskOutputDescription(defaultWait, maxWait time.Duration) string {
	return "Read the output a background task produced since the previous read, followed by its status line " +
		"(`[status: running]`, `[status: completed, exit code: N]`, `[status: killed, signal: SIG]`). " +
		"With `wait: true` it blocks until the task finishes or `timeout_ms` passes (default " + millis(defaultWait) + " ms, at most " + millis(maxWait) + " ms); " +
		"a wait that runs out ends `[status: running; still running after waiting Nms]` and the task keeps running."
}

func millis(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

const (
	taskListDescription = "List this session's background tasks, one per line, running ones first, then in start order: " +
		"`<id> [<kind>] <status>[, <detail>], <elapsed> — <command>`."
	taskKillDescription = "Stop a background task: its process group gets SIGTERM, then SIGKILL after a grace period, and the call waits until the task has ended " +
		"(`killed task <id> [status: killed, signal: SIG]`). Killing a task that already finished is reported, not an error, and its unread output stays readable."
)
