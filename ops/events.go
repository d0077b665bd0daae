package ops

import (
	"math/rand/v2"
	"strconv"
	"time"
)

// Kind names an event: the value of its "event" field.
type Kind string

// The kinds the audit log writes (docs/operations.md#the-audit-log).
const (
	KindCall     Kind = "call"
	KindDecision Kind = "decision"
	KindQuestion Kind = "question"
	KindAnswer   Kind = "answer"
	KindDenied   Kind = "denied"
	KindProcess  Kind = "process"
	KindKill     Kind = "kill"
	KindGrant    Kind = "grant"
)

// The kinds only traces and metrics read: they say how long and how
// often, which the audit log's events already imply.
const (
	KindCallEnd Kind = "call_end"
	KindSpawn   Kind = "spawn"
	KindInit    Kind = "init"
)

// Audited reports whether the audit log writes events of kind k.
func (k Kind) Audited() bool {
	switch k {
	case KindCall, KindDecision, KindQuestion, KindAnswer, KindDenied, KindProcess, KindKill, KindGrant:
		return true
	}
	return false
}

// Event is one fact a layer reports. The types of this package are the
// only events; a Recorder tells them apart with a type switch.
type Event interface {
	// Kind is the event's name.
	EventKind() Kind
	// owner is the session the event belongs to.
	owner() string
	// appendFields appends the event's fields after "event", each as
	// `,"name":value`, in a fixed order, leaving out empty ones.
	appendFields(b []byte) []byte
	// redacted is the event with f applied to every free-text field.
	redacted(f func(string) string) Event
}

// Owner is the session an event belongs to (its "owner" field).
func Owner(e Event) string { return e.owner() }

// Redact returns e with f applied to each field that holds text from a
// model, a user or a command (a command line, a directory, a path, a
// rule, a reason), never to the fields whose values this package names
// (kinds, choices, results).
func Redact(e Event, f func(string) string) Event { return e.redacted(f) }

// NewCallID returns an id for one tool call, unique for the life of a
// server with overwhelming likelihood (64 random bits), that ties the
// events of a call together in the audit log (the "call" field).
func NewCallID() string {
	var b [16]byte
	return string(strconv.AppendUint(b[:0], rand.Uint64()|1<<63, 16)) // 16 hex digits
}

// Call is a tool call as the model made it, before anything else happens
// to it: "call" in the audit log.
type Call struct {
	Owner string
	// CallID ties the call's events together (NewCallID; "call").
	CallID string
	Tool   string // "tool": bash, task_output, task_list, task_kill, task_input
	// Command is the command line of bash (redacted in the audit log).
	Command string
	// Workdir is the directory the model asked for ("" when it gave
	// none: the session's).
	Workdir string
	// Host is the configured host the command runs on ("" on this
	// machine).
	Host       string
	TTY        bool
	Background bool
	// Task is the task a task tool names.
	Task string
}

// Decision is what the permission rules decided about a command line:
// "decision".
type Decision struct {
	Owner, CallID string
	// Decision is "allow", "ask" or "deny".
	Decision string
	// Rule is the rule that decided ("Bash(git push:*)"), "" when none
	// did (the unmatched default, or a Reason).
	Rule string
	// Command is the simple command the decision is about (`git push
	// origin`), "" for the whole line.
	Command string
	// Reason is why without a rule: "dynamic command", "cannot parse",
	// "assignment to PATH", "unmatched".
	Reason string
}

// Question is a question put to the user: "question".
type Question struct {
	Owner, CallID string
	// Kind is "rule" (a rule said ask), "escalation" (run again outside
	// the sandbox after a denial), "outside_sandbox" (the model asked to
	// run outside it) or "network" (a destination the policy asks about).
	Kind string
	// Subject is what it is about: the simple command, the denied path,
	// the destination.
	Subject string
	Reason  string
}

// Answer is the answer to a Question: "answer".
type Answer struct {
	Owner, CallID string
	Kind          string // as the Question's
	// Choice is "allow_once", "allow_session", "deny", "cancel" (the
	// question was withdrawn unanswered), "timeout" or "error" (the
	// client failed to ask).
	Choice string
	// AnsweredBy is "user" (a person chose) or "client" (the client
	// answered without showing anyone: a declined elicitation
	// capability, a cancel, an automatic policy of the client).
	AnsweredBy string
}

// Grant is a permission the user gave beyond one call: "grant".
type Grant struct {
	Owner, CallID string
	// Kind is "rule" (a command prefix allowed for the session),
	// "writable_root" (a directory writable for the session),
	// "network" (a destination reachable) or "outside_sandbox".
	Kind string
	// Subject is what is granted: the prefix, the directory, the
	// destination, the command line.
	Subject string
	// Scope is "once" or "session".
	Scope string
}

// Denied is an operation the sandbox refused a command, from the kernel's
// record (never from what the command printed): "denied".
type Denied struct {
	Owner, CallID string
	Task          string
	Host          string
	// Path is the file of a file operation or a unix socket's path;
	// Destination the "host:port" of a network connect.
	Path, Destination string
	// Op is "write", "read" or "connect".
	Op string
	// Reason is the sandbox's reason code ("read-only", "protected",
	// "not in the allowlist", "own server", …).
	Reason string
}

// Process is the end of a command's process: "process".
type Process struct {
	Owner, CallID string
	// Task is the task id of a background task (or a call that moved to
	// the background), "" for a foreground call.
	Task string
	Host string
	// ExitCode is the exit code when Signal is "" ("exit_code"), else
	// the name of the signal that ended it ("SIGKILL").
	ExitCode int
	Signal   string
	TimedOut bool
	Duration time.Duration // "duration_ms"
	// OutputBytes is what it wrote, stdout and stderr together.
	OutputBytes int64
}

// Kill is a task stopped by someone other than itself: "kill".
type Kill struct {
	Owner string
	Task  string
	Host  string
	// Reason is "task_kill" (the model asked), "session_end" or
	// "shutdown".
	Reason string
	// Processes is how many processes it left running were killed with
	// it, when known.
	Processes int
}

// CallEnd is the end of a tool call (traces and metrics only).
type CallEnd struct {
	Owner, CallID string
	Tool          string
	// Result is "ok", "error" (the tool failed, or the command exited
	// non-zero or by a signal), "denied" (rules or the user refused it),
	// "background" (it became, or started, a background task) or
	// "cancelled".
	Result   string
	Duration time.Duration
}

// Spawn is a command's process started (traces and metrics only).
type Spawn struct {
	Owner, CallID string
	Task          string
	Host          string
	// Sandbox is the sandbox it runs in: "read-only", "workspace-write",
	// "full-access", "none" (no sandbox on this host), or "outside"
	// (the user let it out).
	Sandbox string
}

// Init is a session's init started (containment, docs/containment.md;
// traces and metrics only).
type Init struct {
	Owner string
	Host  string
	// Result is "ok" or "failed".
	Result   string
	Duration time.Duration
}

func (Call) EventKind() Kind     { return KindCall }
func (Decision) EventKind() Kind { return KindDecision }
func (Question) EventKind() Kind { return KindQuestion }
func (Answer) EventKind() Kind   { return KindAnswer }
func (Grant) EventKind() Kind    { return KindGrant }
func (Denied) EventKind() Kind   { return KindDenied }
func (Process) EventKind() Kind  { return KindProcess }
func (Kill) EventKind() Kind     { return KindKill }
func (CallEnd) EventKind() Kind  { return KindCallEnd }
func (Spawn) EventKind() Kind    { return KindSpawn }
func (Init) EventKind() Kind     { return KindInit }

func (e Call) owner() string     { return e.Owner }
func (e Decision) owner() string { return e.Owner }
func (e Question) owner() string { return e.Owner }
func (e Answer) owner() string   { return e.Owner }
func (e Grant) owner() string    { return e.Owner }
func (e Denied) owner() string   { return e.Owner }
func (e Process) owner() string  { return e.Owner }
func (e Kill) owner() string     { return e.Owner }
func (e CallEnd) owner() string  { return e.Owner }
func (e Spawn) owner() string    { return e.Owner }
func (e Init) owner() string     { return e.Owner }

func (e Call) redacted(f func(string) string) Event {
	e.Command, e.Workdir = f(e.Command), f(e.Workdir)
	return e
}

func (e Decision) redacted(f func(string) string) Event {
	e.Rule, e.Command, e.Reason = f(e.Rule), f(e.Command), f(e.Reason)
	return e
}

func (e Question) redacted(f func(string) string) Event {
	e.Subject, e.Reason = f(e.Subject), f(e.Reason)
	return e
}

func (e Answer) redacted(func(string) string) Event { return e }

func (e Grant) redacted(f func(string) string) Event {
	e.Subject = f(e.Subject)
	return e
}

func (e Denied) redacted(f func(string) string) Event {
	e.Path, e.Destination, e.Reason = f(e.Path), f(e.Destination), f(e.Reason)
	return e
}

func (e Process) redacted(func(string) string) Event { return e }
func (e Kill) redacted(func(string) string) Event    { return e }
func (e CallEnd) redacted(func(string) string) Event { return e }
func (e Spawn) redacted(func(string) string) Event   { return e }
func (e Init) redacted(func(string) string) Event    { return e }
