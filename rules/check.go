package rules

import (
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"

	"mvdan.cc/sh/v3/syntax"
)

// Reasons a command is decided without a rule.
const (
	// ReasonDynamic: what runs is only known when the line runs (a
	// command name that is not a literal, eval, source of a non-literal
	// file, a shell given a non-literal script or reading one from stdin).
	ReasonDynamic = "dynamic command"
	// ReasonUnparsable: the line is not valid bash.
	ReasonUnparsable = "cannot parse"
	// ReasonUnmatched: no rule matches the command.
	ReasonUnmatched = "no rule matches"
	// ReasonWrapper: a wrapper no rule matches (env, sudo, timeout…); the
	// command it runs is checked on its own.
	ReasonWrapper = "wrapper; the command it runs is checked"
	// ReasonNoCommands: the line runs no command (blank, comments,
	// assignments).
	ReasonNoCommands = "no commands"
)

// dangerousVars change what later commands run, so assigning them makes
// the line dynamic.
var dangerousVars = map[string]bool{
	"PATH": true, "BASH_ENV": true, "ENV": true, "LD_PRELOAD": true, "PROMPT_COMMAND": true,
}

// assignmentReason is the reason for an assignment to a dangerous variable.
func assignmentReason(name string) string { return "assignment to " + name }

// maxDepth bounds the re-parsing of `bash -c` scripts inside scripts; a
// line nested deeper is dynamic.
const maxDepth = 16

// Command is one simple command found in a line, with its verdict.
type Command struct {
	// Text is the command's words joined by single spaces: a literal word
	// after quote removal (the first word reduced to its basename), any
	// other word as written (`"$f"`, `$(ls)`).
	Text string
	// Verdict is what the rules say about this command alone.
	Verdict Verdict
	// Rule is the rule that decided it, "" when none did.
	Rule string
	// Reason says why when no rule decided: one of the Reason constants
	// or "assignment to <NAME>".
	Reason string
	// Wrapper marks a wrapper (env, sudo, timeout, xargs, bash -c…) whose
	// inner command is a Command of its own.
	Wrapper bool
}

// Decision is the checker's answer for a whole command line.
type Decision struct {
	Verdict Verdict
	// Commands are the simple commands found, in the order the parser
	// met them (a command before the commands inside its arguments).
	Commands []Command
	// Command is the deciding simple command: the first of the strictest
	// verdict, preferring a wrapped command over its wrapper. It is ""
	// when the line could not be parsed or runs no command.
	Command string
	// Rule is the deciding rule, "" when Reason decided.
	Rule string
	// Reason is why when no rule decided.
	Reason string
}

// Why is the deciding rule as `rule <rule>`, else the reason.
func (d Decision) Why() string {
	if d.Rule != "" {
		return "rule " + d.Rule
	}
	return d.Reason
}

// Check decides a command line. It is a pure function of r and line.
//
// It finds every simple command bash would run from the line: in lists,
// pipelines, subshells, blocks, loops, conditions, function bodies, $(…),
// backticks, <(…), unquoted heredocs and after leading assignments; and
// the commands run by env, command, builtin, exec, nohup, nice, timeout,
// time, stdbuf, sudo, doas, xargs, find -exec and trap, and inside a
// literal `bash|sh|zsh -c <script>` (parsed again). Each is matched
// against r: deny, then ask, then allow, then r.Unmatched; a dynamic
// command or an assignment to PATH, BASH_ENV, ENV, LD_PRELOAD or
// PROMPT_COMMAND is ask; an unparsable line is ask. The strictest verdict
// wins.
func (r *Rules) Check(line string) Decision {
	if r == nil {
		r = &Rules{}
	}
	c := checker{rules: r}
	return decide(c.found, c.script(line, 0))
}

// decide picks the deciding command among found; parsed is false when the
// line did not parse to its end.
func decide(found []Command, parsed bool) Decision {
	best := -1
	for i, cmd := range found {
		if best < 0 || rank(cmd) > rank(found[best]) {
			best = i
		}
	}
	// bash runs a multi-line script's first lines before it meets a
	// syntax error further on, so what parsed is decided too.
	if !parsed && (best < 0 || found[best].Verdict < Deny) {
		return Decision{Verdict: Ask, Commands: found, Reason: ReasonUnparsable}
	}
	if best < 0 {
		return Decision{Verdict: Allow, Reason: ReasonNoCommands}
	}
	d := found[best]
	return Decision{Verdict: d.Verdict, Commands: found, Command: d.Text, Rule: d.Rule, Reason: d.Reason}
}

// Allowing returns d with every command that asks because of an ask rule
// or because no rule matched it, and that one of allowed matches, allowed
// by that rule: the rules a user allowed for the rest of a session. A
// deny, a dynamic command, a dangerous assignment and an unparsable line
// are not changed.
func (d Decision) Allowing(allowed []Rule) Decision {
	if len(allowed) == 0 || d.Verdict != Ask || d.Command == "" {
		return d
	}
	cmds := slices.Clone(d.Commands)
	for i, c := range cmds {
		if c.Verdict != Ask || c.Rule == "" && c.Reason != ReasonUnmatched {
			continue
		}
		for _, r := range allowed {
			if r.Match(c.Text) {
				cmds[i].Verdict, cmds[i].Rule, cmds[i].Reason = Allow, r.raw, ""
				break
			}
		}
	}
	return decide(cmds, true)
}

// subcommand is a second word that names a subcommand (`git push`, `npm
// publish`), not an option, a file or a value.
var subcommand = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)

// SessionRule is what a user may allow for the rest of a session instead
// of once, for an ask decision: the ask rule that decided; for a command
// no rule matched, `Bash(<name>:*)`, or `Bash(<name> <subcommand>:*)`
// when its second word looks like a subcommand (`npm install lodash`
// gives `Bash(npm install:*)`). ok is false for any other decision (a
// dynamic command, a dangerous assignment, an unparsable line).
func (d Decision) SessionRule() (r Rule, ok bool) {
	if d.Verdict != Ask || d.Command == "" {
		return Rule{}, false
	}
	text := d.Rule
	if text == "" {
		if d.Reason != ReasonUnmatched {
			return Rule{}, false
		}
		words := strings.SplitN(d.Command, " ", 3)
		prefix := words[0]
		if len(words) > 1 && subcommand.MatchString(words[1]) {
			prefix += " " + words[1]
		}
		text = "Bash(" + prefix + ":*)"
	}
	r, err := ParseRule(text)
	return r, err == nil
}

// rank orders commands for the deciding one: the verdict first, then a
// command over a wrapper.
func rank(c Command) int {
	r := int(c.Verdict) * 2
	if !c.Wrapper {
		r++
	}
	return r
}

type checker struct {
	rules *Rules
	found []Command
}

var parsers = sync.Pool{New: func() any { return syntax.NewParser(syntax.Variant(syntax.LangBash)) }}

// script parses and walks one script, statement by statement; false when
// it does not parse (the statements before the error are walked).
func (c *checker) script(src string, depth int) bool {
	parsed := true
	// No break: StmtsSeq of v3.14.1 panics when the loop stops early
	// after an error ("0&0\xba").
	p := parsers.Get().(*syntax.Parser)
	defer parsers.Put(p)
	for st, err := range p.StmtsSeq(strings.NewReader(src)) {
		if err != nil || !parsed {
			parsed = false
			continue
		}
		syntax.Walk(st, func(n syntax.Node) bool {
			switch n := n.(type) {
			case *syntax.CallExpr:
				c.assigns(n.Assigns, n.Args)
				if len(n.Args) > 0 {
					c.command(n.Args, depth)
				}
			case *syntax.DeclClause:
				c.assigns(n.Args, nil)
			}
			return true
		})
	}
	return parsed
}

// assigns records an assignment to a dangerous variable as an ask,
// attributed to the command it prefixes (or to the assignment itself).
func (c *checker) assigns(as []*syntax.Assign, args []*syntax.Word) {
	for _, a := range as {
		name := ""
		if a.Name != nil {
			name = a.Name.Value
		} else if a.Value != nil {
			// export "PATH=/tmp": the parser leaves a quoted
			// assignment argument whole.
			if v, ok := literal(a.Value); ok {
				name, _, _ = strings.Cut(v, "=")
			}
		}
		if !dangerousVars[name] {
			continue
		}
		text := name + "="
		if len(args) > 0 {
			text = commandText(args)
		}
		c.add(Command{Text: text, Verdict: Ask, Reason: assignmentReason(name)})
	}
}

// command records the simple command words and whatever it runs.
func (c *checker) command(words []*syntax.Word, depth int) {
	text := commandText(words)
	name, ok := commandName(words[0])
	if !ok {
		c.add(Command{Text: text, Verdict: Ask, Reason: ReasonDynamic})
		return
	}
	u := unwrap(name, words)
	switch u.how {
	case notWrapper:
		c.add(c.match(Command{Text: text}))
	case dynamic:
		c.add(Command{Text: text, Verdict: Ask, Reason: ReasonDynamic})
	case wraps:
		c.add(c.match(Command{Text: text, Wrapper: true}))
		if len(u.inner) > 0 {
			c.command(u.inner, depth)
		}
	case runsScript:
		c.add(c.match(Command{Text: text, Wrapper: true}))
		src, _ := literal(u.inner[0])
		if depth >= maxDepth || !c.script(src, depth+1) {
			c.add(Command{Text: text, Verdict: Ask, Reason: ReasonUnparsable})
		}
	case findExec:
		c.add(c.match(Command{Text: text}))
		for _, ws := range u.execs {
			c.command(ws, depth)
		}
	case assignsDangerous:
		c.add(Command{Text: text, Verdict: Ask, Reason: assignmentReason(u.assigned)})
	}
}

func (c *checker) add(cmd Command) { c.found = append(c.found, cmd) }

// match sets cmd's verdict from the rules.
func (c *checker) match(cmd Command) Command {
	if x, ok := c.rules.lookup(cmd.Text); ok {
		cmd.Verdict, cmd.Rule = x.verdict, x.rule.raw
		return cmd
	}
	if cmd.Wrapper {
		cmd.Verdict, cmd.Reason = Allow, ReasonWrapper
		return cmd
	}
	cmd.Verdict, cmd.Reason = c.rules.Unmatched, ReasonUnmatched
	return cmd
}

// commandText is the text rules are matched against: literal words after
// quote removal, other words as written, joined by single spaces, the
// first word reduced to its basename.
func commandText(words []*syntax.Word) string {
	var b strings.Builder
	if n := int(words[len(words)-1].End().Offset()) - int(words[0].Pos().Offset()); n > 0 {
		b.Grow(n)
	}
	for i, w := range words {
		if i > 0 {
			b.WriteByte(' ')
		}
		s, ok := literal(w)
		if !ok {
			s = printWord(w)
		} else if i == 0 {
			s = path.Base(s)
		}
		b.WriteString(s)
	}
	return b.String()
}

// printers are reused: a new Printer allocates a 4 KB buffer, which
// dominated the cost of checking a long line.
var printers = sync.Pool{New: func() any { return syntax.NewPrinter() }}

// printWord is w as written (the printer's canonical form of it).
func printWord(w *syntax.Word) string {
	p := printers.Get().(*syntax.Printer)
	defer printers.Put(p)
	var b strings.Builder
	if err := p.Print(&b, w); err != nil {
		return "?"
	}
	return b.String()
}

// commandName is a command word's name for matching: its basename after
// quote removal. ok is false when the word is not a literal or would be
// changed by pathname or brace expansion.
func commandName(w *syntax.Word) (string, bool) {
	s, ok := literal(w)
	if !ok {
		return "", false
	}
	for _, p := range w.Parts {
		if l, isLit := p.(*syntax.Lit); isLit && expands(l.Value) {
			return "", false
		}
	}
	return path.Base(s), true
}

// expands reports whether unquoted text holds a glob or brace expansion
// (an approximation erring towards yes; `[` alone is the test command).
func expands(s string) bool {
	if strings.ContainsAny(s, "*?") {
		return true
	}
	if i := strings.IndexByte(s, '['); i >= 0 && strings.IndexByte(s[i:], ']') > 0 {
		return true
	}
	if i := strings.IndexByte(s, '{'); i >= 0 && strings.IndexByte(s[i:], '}') > 0 {
		return true
	}
	return false
}

// literal is w after quote removal when w is made of literal text only:
// plain text, '…' and "…" without expansions. $'…' and $"…" are not
// literal (their escapes and translations change the text).
func literal(w *syntax.Word) (string, bool) {
	if len(w.Parts) == 1 { // the common case, without a copy
		switch p := w.Parts[0].(type) {
		case *syntax.Lit:
			return unescape(p.Value, ""), true
		case *syntax.SglQuoted:
			return p.Value, !p.Dollar
		}
	}
	var b strings.Builder
	for _, p := range w.Parts {
		switch p := p.(type) {
		case *syntax.Lit:
			b.WriteString(unescape(p.Value, ""))
		case *syntax.SglQuoted:
			if p.Dollar {
				return "", false
			}
			b.WriteString(p.Value)
		case *syntax.DblQuoted:
			if p.Dollar {
				return "", false
			}
			for _, q := range p.Parts {
				l, ok := q.(*syntax.Lit)
				if !ok {
					return "", false
				}
				b.WriteString(unescape(l.Value, "$`\"\\\n"))
			}
		default:
			return "", false
		}
	}
	return b.String(), true
}

// unescape removes backslashes the way bash does: outside quotes (only =="")
// before any character, inside double quotes only before one of only.
func unescape(s, only string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) && (only == "" || strings.IndexByte(only, s[i+1]) >= 0) {
			i++
			if s[i] == '\n' {
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
