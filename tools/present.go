package tools

import (
	"encoding/json"
	"regexp"
	"strings"
	"sync"
)

// Cards an editor can draw.
const (
	CardTerminal = "terminal"
	CardGeneric  = "generic"
)

// View is how an editor should draw a tool call or its result (see
// docs/presentation.md). Which fields are set depends on Card and on call vs result.
type View struct {
	Card string `json:"card"`
	// Call fields.
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	Cwd         string `json:"cwd,omitempty"`
	// Host is the remote host a bash call runs on ("" for this machine);
	// Cwd is then a path of that host, as the model gave it.
	Host     string   `json:"host,omitempty"`
	Kind     string   `json:"kind,omitempty"` // "execute", "read"
	RawInput string   `json:"rawInput,omitempty"`
	Content  []string `json:"content,omitempty"`
	// Result fields of a terminal card.
	Output   *string `json:"output,omitempty"`
	ExitCode *int    `json:"exitCode,omitempty"`
	Signal   string  `json:"signal,omitempty"`
}

// Terminal reports whether v is a terminal card.
func (v View) Terminal() bool { return v.Card == CardTerminal }

// PresentCall is how an editor draws a call of tool with the model's
// arguments. ok is false when the arguments are malformed (the UI then
// falls back to its own generic card). It never panics.
func PresentCall(tool string, args json.RawMessage) (v View, ok bool) {
	a := parseArgs(args)
	switch tool {
	case NameBash:
		cmd, ok := bashCommand(a)
		if !ok {
			return View{}, false
		}
		desc, _ := a.optString("description")
		if bg, _ := a.optBool("run_in_background"); bg {
			v := View{Card: CardGeneric, Title: cmd, Kind: "execute", RawInput: cmd}
			if desc != "" {
				v.Content = []string{desc}
			}
			return v, true
		}
		wd, _ := a.optString("workdir")
		host, _ := a.optString("host")
		if host == HostLocal {
			host = ""
		}
		return View{Card: CardTerminal, Title: cmd, Description: desc, Cwd: wd, Host: host}, true
	case NameTaskOutput:
		id, ok := a.nonEmptyString("task_id")
		if !ok {
			return View{}, false
		}
		return View{Card: CardGeneric, Title: "Read output from background task " + id, Kind: "read", RawInput: id}, true
	case NameTaskList:
		return View{Card: CardGeneric, Title: "List background tasks", Kind: "read"}, true
	case NameTaskKill:
		id, ok := a.nonEmptyString("task_id")
		if !ok {
			return View{}, false
		}
		return View{Card: CardGeneric, Title: "Kill background task " + id, Kind: "execute", RawInput: id}, true
	case NameTaskInput:
		id, ok := a.nonEmptyString("task_id")
		if !ok {
			return View{}, false
		}
		return View{Card: CardGeneric, Title: "Type into background task " + id, Kind: "execute", RawInput: id}, true
	}
	return View{}, false
}

// bashCommand reads the command of a bash call as drawn: a string, even a
// blank one a model should not have sent.
func bashCommand(a rawArgs) (string, bool) {
	var cmd string
	if !a.present("command") || json.Unmarshal(a["command"], &cmd) != nil {
		return "", false
	}
	return cmd, true
}

var yieldedMarker = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(^|\n)(\[still running after \d+ms; moved to background task [^\]\n]+: read it with task_output, stop it with task_kill\]|` +
		`\[waiting for input; moved to background task [^\]\n]+: send input with task_input, read it with task_output, stop it with task_kill\])$`)
})

// PresentResult is how an editor draws the result of a call: texts are the
// result's text blocks (a transport that appends notice blocks passes the
// main block alone), isError its error flag. ok is false when there is not
// exactly one text block or the call is not drawable. It never panics.
func PresentResult(tool string, args json.RawMessage, texts []string, isError bool) (v View, ok bool) {
	if len(texts) != 1 {
		return View{}, false
	}
	text := texts[0]
	call, ok := PresentCall(tool, args)
	if !ok {
		return View{}, false
	}
	// The line of the user's answer follows the exit marker
	// (docs/sandbox.md#escalation): the pill shows the exit, the text
	// keeps the line.
	body, answer := cutAnswerLine(text)
	if isError || !call.Terminal() || yieldedMarker().MatchString(body) {
		return View{Card: CardGeneric, Content: []string{ConsoleFence(text)}}, true
	}
	st := parseExitStatus(body)
	out := st.Output
	if answer != "" {
		out = withMarkers(out, answer)
	}
	v = View{Card: CardTerminal, Output: &out}
	if st.Signal != "" {
		v.Signal = st.Signal
	} else {
		code := st.ExitCode
		v.ExitCode = &code
	}
	return v, true
}

// grantedLinePattern matches grantedLine's text.
var grantedLinePattern = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`\n(\[ran again with writes to [^\n]* allowed for this session\])$`)
})

// cutAnswerLine cuts the line of a question's answer off the end of a
// result text: body is the rest, line "" when there is none.
func cutAnswerLine(text string) (body, line string) {
	for _, l := range []string{EscalatedLine, RanAgainLine, DeclinedLine, UnansweredLine} {
		if b, ok := strings.CutSuffix(text, "\n"+l); ok {
			return b, l
		}
	}
	if m := grantedLinePattern().FindStringSubmatchIndex(text); m != nil {
		return text[:m[0]], text[m[2]:m[3]]
	}
	return text, ""
}

// ConsoleFence wraps text in a ```console block for a UI that cannot draw
// a terminal.
func ConsoleFence(text string) string {
	return "```console\n" + strings.TrimRight(text, "\n") + "\n```"
}
