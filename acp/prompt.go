package acp

import (
	"encoding/json"
	"net/url"
	"regexp"
	"strings"
	"sync"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/conch-dev/conch/tools"
)

// promptDescription is the description conch acp gives the bash tool for
// a command the user typed. The tool requires one (it is meant for a
// model to explain itself); the card is drawn without it, since the
// person who typed the command needs no summary of it.
const promptDescription = "Run a command typed at the prompt"

// helpText is what conch acp answers to a blank prompt, to /help and,
// after a line naming it, to an unknown /word.
const helpText = "conch runs each prompt as one bash command in the session's folder. " +
	"Start it with `&` to run it in the background; `/tty <command>` runs a program that asks for input on a terminal " +
	"(it becomes a background task when it waits for input); `/tasks` lists background tasks, " +
	"`/output <id>` reads one's new output, `/input <id> <text>` types a line into one, `/kill <id>` stops one."

// The answers to a task command without its task id.
const (
	usageOutput = "Usage: `/output <id>` reads a background task's new output; `/tasks` lists them."
	usageKill   = "Usage: `/kill <id>` stops a background task; `/tasks` lists them."
	usageInput  = "Usage: `/input <id> <text>` types a line into a background task started with `/tty`; `/tasks` lists them."
	usageTTY    = "Usage: `/tty <command>` runs a command on a terminal; answer it with `/input <id> <text>`."
)

// unknownCommand is the answer to a /word that is not a conch command.
func unknownCommand(word string) string {
	return "Unknown command `" + word + "`. " + helpText
}

// slashWord is what a conch command looks like: a slash and a name. A
// word with a second slash is a path, run as a command (a program in /
// itself runs as `command /name`).
var slashWord = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^/[A-Za-z][A-Za-z0-9_-]*$`) })

// promptCall is the tool call a prompt asks for.
type promptCall struct {
	tool string
	draw json.RawMessage // the arguments as drawn and recorded
	exec json.RawMessage // the arguments the tool runs with
}

// parsePrompt maps a prompt's text to a tool call, or to a reply sent
// instead of any call. `/tasks`, `/output <id>` and `/kill <id>` call the
// task tools, `/input <id> <text>` types text and Enter into a task
// (task_input), `&<command>` is a background bash call, `/tty <command>`
// a bash call on a terminal, anything else a foreground bash call. A
// blank prompt and `/help` are answered with helpText, an unknown /word
// with unknownCommand, `/output`, `/kill` and `/input` without an id and
// `/tty` without a command with their usage line. `&` alone still makes a call, so
// that the tool reports the error.
func parsePrompt(text string) (c promptCall, reply string) {
	t := strings.TrimSpace(text)
	if t == "" {
		return c, helpText
	}
	fields := strings.Fields(t)
	taskID := ""
	if len(fields) > 1 {
		taskID = fields[1]
	}
	taskArgs := func() json.RawMessage {
		return mustJSON(struct {
			TaskID string `json:"task_id"`
		}{taskID})
	}
	switch fields[0] {
	case "/help":
		return c, helpText
	case "/tasks":
		c.tool, c.draw = tools.NameTaskList, mustJSON(struct{}{})
		c.exec = c.draw
		return c, ""
	case "/output":
		if taskID == "" {
			return c, usageOutput
		}
		c.tool, c.draw = tools.NameTaskOutput, taskArgs()
		c.exec = c.draw
		return c, ""
	case "/kill":
		if taskID == "" {
			return c, usageKill
		}
		c.tool, c.draw = tools.NameTaskKill, taskArgs()
		c.exec = c.draw
		return c, ""
	case "/input":
		if taskID == "" {
			return c, usageInput
		}
		_, rest, _ := strings.Cut(strings.TrimSpace(strings.TrimPrefix(t, "/input")), taskID)
		c.tool, c.draw = tools.NameTaskInput, mustJSON(struct {
			TaskID string   `json:"task_id"`
			Text   string   `json:"text"`
			Keys   []string `json:"keys"`
		}{taskID, strings.TrimLeft(rest, " \t"), []string{"Enter"}})
		c.exec = c.draw
		return c, ""
	}
	if slashWord().MatchString(fields[0]) && fields[0] != "/tty" {
		return c, unknownCommand(fields[0])
	}
	type bashArgs struct {
		Command     string `json:"command"`
		Description string `json:"description,omitempty"`
		Background  bool   `json:"run_in_background,omitempty"`
		TTY         bool   `json:"tty,omitempty"`
	}
	a := bashArgs{Command: t}
	if rest, bg := strings.CutPrefix(t, "&"); bg {
		a = bashArgs{Command: strings.TrimSpace(rest), Background: true}
	}
	if fields[0] == "/tty" {
		if len(fields) == 1 {
			return c, usageTTY
		}
		a = bashArgs{Command: strings.TrimSpace(strings.TrimPrefix(t, "/tty")), TTY: true}
	}
	c.tool, c.draw = tools.NameBash, mustJSON(a)
	a.Description = promptDescription
	c.exec = mustJSON(a)
	return c, ""
}

// promptText is the text of a prompt: its text blocks, with each link to
// a local file (an @-mention in Zed) replaced by the file's path, quoted
// for the shell when it needs to be.
func promptText(blocks []sdk.ContentBlock) string {
	var b strings.Builder
	for _, c := range blocks {
		switch {
		case c.Text != nil:
			b.WriteString(c.Text.Text)
		case c.ResourceLink != nil:
			u, err := url.Parse(c.ResourceLink.Uri)
			if err == nil && u.Scheme == "file" && u.Path != "" {
				b.WriteString(shellQuote(u.Path))
			} else {
				b.WriteString(c.ResourceLink.Uri)
			}
		}
	}
	return b.String()
}

// shellQuote quotes s for bash when it has anything but safe characters.
func shellQuote(s string) string {
	safe := true
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-+:@,%=", r)) {
			safe = false
			break
		}
	}
	if safe && s != "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
