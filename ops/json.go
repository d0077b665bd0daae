package ops

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"
)

// The JSON form of an event is one object: "event" (its Kind), "owner",
// then its fields in the order of its type, each left out when empty
// (an empty string, false, zero) except the ones a reader needs to tell
// "none" from "absent": a process's "exit_code" (written whenever it has
// no signal), "duration_ms" and "output_bytes".

// Marshal returns the JSON form of e.
func Marshal(e Event) []byte {
	b := make([]byte, 0, 256)
	b = append(b, `{"event":`...)
	b = AppendString(b, string(e.EventKind()))
	b = append(b, `,"owner":`...)
	b = AppendString(b, e.owner())
	b = e.appendFields(b)
	return append(b, '}')
}

// AppendFields appends the fields of e after "event" and "owner", each
// as `,"name":value`: what the audit log writes after its own header.
func AppendFields(b []byte, e Event) []byte { return e.appendFields(b) }

func (e Call) appendFields(b []byte) []byte {
	b = field(b, "call_id", e.CallID)
	b = field(b, "tool", e.Tool)
	b = field(b, "command", e.Command)
	b = field(b, "workdir", e.Workdir)
	b = field(b, "host", e.Host)
	b = flag(b, "tty", e.TTY)
	b = flag(b, "background", e.Background)
	return field(b, "task", e.Task)
}

func (e Decision) appendFields(b []byte) []byte {
	b = field(b, "call_id", e.CallID)
	b = field(b, "decision", e.Decision)
	b = field(b, "rule", e.Rule)
	b = field(b, "command", e.Command)
	return field(b, "reason", e.Reason)
}

func (e Question) appendFields(b []byte) []byte {
	b = field(b, "call_id", e.CallID)
	b = field(b, "kind", e.Kind)
	b = field(b, "subject", e.Subject)
	return field(b, "reason", e.Reason)
}

func (e Answer) appendFields(b []byte) []byte {
	b = field(b, "call_id", e.CallID)
	b = field(b, "kind", e.Kind)
	b = field(b, "choice", e.Choice)
	return field(b, "answered_by", e.AnsweredBy)
}

func (e Grant) appendFields(b []byte) []byte {
	b = field(b, "call_id", e.CallID)
	b = field(b, "kind", e.Kind)
	b = field(b, "subject", e.Subject)
	return field(b, "scope", e.Scope)
}

func (e Denied) appendFields(b []byte) []byte {
	b = field(b, "call_id", e.CallID)
	b = field(b, "task", e.Task)
	b = field(b, "host", e.Host)
	b = field(b, "path", e.Path)
	b = field(b, "destination", e.Destination)
	b = field(b, "op", e.Op)
	return field(b, "reason", e.Reason)
}

func (e Process) appendFields(b []byte) []byte {
	b = field(b, "call_id", e.CallID)
	b = field(b, "task", e.Task)
	b = field(b, "host", e.Host)
	if e.Signal != "" {
		b = field(b, "signal", e.Signal)
	} else {
		b = append(b, `,"exit_code":`...)
		b = strconv.AppendInt(b, int64(e.ExitCode), 10)
	}
	b = flag(b, "timed_out", e.TimedOut)
	b = millis(b, e.Duration)
	b = append(b, `,"output_bytes":`...)
	return strconv.AppendInt(b, e.OutputBytes, 10)
}

func (e Kill) appendFields(b []byte) []byte {
	b = field(b, "task", e.Task)
	b = field(b, "host", e.Host)
	b = field(b, "reason", e.Reason)
	if e.Processes != 0 {
		b = append(b, `,"processes":`...)
		b = strconv.AppendInt(b, int64(e.Processes), 10)
	}
	return b
}

func (e CallEnd) appendFields(b []byte) []byte {
	b = field(b, "call_id", e.CallID)
	b = field(b, "tool", e.Tool)
	b = field(b, "result", e.Result)
	return millis(b, e.Duration)
}

func (e Spawn) appendFields(b []byte) []byte {
	b = field(b, "call_id", e.CallID)
	b = field(b, "task", e.Task)
	b = field(b, "host", e.Host)
	return field(b, "sandbox", e.Sandbox)
}

func (e Init) appendFields(b []byte) []byte {
	b = field(b, "host", e.Host)
	b = field(b, "result", e.Result)
	return millis(b, e.Duration)
}

func field(b []byte, name, v string) []byte {
	if v == "" {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return AppendString(b, v)
}

func flag(b []byte, name string, v bool) []byte {
	if !v {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, name...)
	return append(b, `":true`...)
}

// millis writes d as "duration_ms", in milliseconds with microseconds
// as the fraction.
func millis(b []byte, d time.Duration) []byte {
	b = append(b, `,"duration_ms":`...)
	return strconv.AppendFloat(b, float64(d.Microseconds())/1000, 'f', -1, 64)
}

const hexDigits = "0123456789abcdef"

// AppendString appends s as a JSON string, as encoding/json writes it
// (invalid UTF-8 becomes U+FFFD; U+2028 and U+2029 are escaped) except
// that <, > and & are left as they are.
func AppendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// wire is every field of every event, for Unmarshal.
type wire struct {
	Event       Kind     `json:"event"`
	Owner       string   `json:"owner"`
	CallID      string   `json:"call_id"`
	Tool        string   `json:"tool"`
	Command     string   `json:"command"`
	Workdir     string   `json:"workdir"`
	Host        string   `json:"host"`
	TTY         bool     `json:"tty"`
	Background  bool     `json:"background"`
	Task        string   `json:"task"`
	Decision    string   `json:"decision"`
	Rule        string   `json:"rule"`
	Reason      string   `json:"reason"`
	Kind        string   `json:"kind"`
	Subject     string   `json:"subject"`
	Choice      string   `json:"choice"`
	AnsweredBy  string   `json:"answered_by"`
	Scope       string   `json:"scope"`
	Path        string   `json:"path"`
	Destination string   `json:"destination"`
	Op          string   `json:"op"`
	ExitCode    *int     `json:"exit_code"`
	Signal      string   `json:"signal"`
	TimedOut    bool     `json:"timed_out"`
	DurationMs  *float64 `json:"duration_ms"`
	OutputBytes int64    `json:"output_bytes"`
	Processes   int      `json:"processes"`
	Result      string   `json:"result"`
	Sandbox     string   `json:"sandbox"`
}

// ErrUnknownKind is Unmarshal's error for an "event" it does not know.
var ErrUnknownKind = errors.New("unknown event kind")

// Unmarshal reads an event from its JSON form (Marshal's, or an audit
// line: fields it does not know are ignored).
func Unmarshal(data []byte) (Event, error) {
	var w wire
	if err := json.Unmarshal(data, &w); err != nil {
		return nil, fmt.Errorf("ops: unmarshal: %w", err)
	}
	return w.event()
}

func (w *wire) event() (Event, error) {
	var d time.Duration
	if w.DurationMs != nil {
		d = time.Duration(*w.DurationMs * float64(time.Millisecond)).Round(time.Microsecond)
	}
	switch w.Event {
	case KindCall:
		return Call{Owner: w.Owner, CallID: w.CallID, Tool: w.Tool, Command: w.Command, Workdir: w.Workdir,
			Host: w.Host, TTY: w.TTY, Background: w.Background, Task: w.Task}, nil
	case KindDecision:
		return Decision{Owner: w.Owner, CallID: w.CallID, Decision: w.Decision, Rule: w.Rule, Command: w.Command, Reason: w.Reason}, nil
	case KindQuestion:
		return Question{Owner: w.Owner, CallID: w.CallID, Kind: w.Kind, Subject: w.Subject, Reason: w.Reason}, nil
	case KindAnswer:
		return Answer{Owner: w.Owner, CallID: w.CallID, Kind: w.Kind, Choice: w.Choice, AnsweredBy: w.AnsweredBy}, nil
	case KindGrant:
		return Grant{Owner: w.Owner, CallID: w.CallID, Kind: w.Kind, Subject: w.Subject, Scope: w.Scope}, nil
	case KindDenied:
		return Denied{Owner: w.Owner, CallID: w.CallID, Task: w.Task, Host: w.Host, Path: w.Path,
			Destination: w.Destination, Op: w.Op, Reason: w.Reason}, nil
	case KindProcess:
		p := Process{Owner: w.Owner, CallID: w.CallID, Task: w.Task, Host: w.Host, Signal: w.Signal,
			TimedOut: w.TimedOut, Duration: d, OutputBytes: w.OutputBytes}
		if w.ExitCode != nil {
			p.ExitCode = *w.ExitCode
		}
		return p, nil
	case KindKill:
		return Kill{Owner: w.Owner, Task: w.Task, Host: w.Host, Reason: w.Reason, Processes: w.Processes}, nil
	case KindCallEnd:
		return CallEnd{Owner: w.Owner, CallID: w.CallID, Tool: w.Tool, Result: w.Result, Duration: d}, nil
	case KindSpawn:
		return Spawn{Owner: w.Owner, CallID: w.CallID, Task: w.Task, Host: w.Host, Sandbox: w.Sandbox}, nil
	case KindInit:
		return Init{Owner: w.Owner, Host: w.Host, Result: w.Result, Duration: d}, nil
	}
	return nil, fmt.Errorf("ops: unmarshal: %w %q", ErrUnknownKind, w.Event)
}
