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
	// file, a shell given a non-literal script or reading one from stdin,
	// text evaluated as code, a command name rebound).
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

// maxDepth bounds the re-parsing of `bash -c` scripts inside scripts; a
// line nested deeper is dynamic.
const maxDepth = 16

// Command is one simple command found in a line, with its verdict.
type Command struct {
	// Text is the command's words joined by single spaces: a literal word
	// after quote removal, any other word as written (`"$f"`, `$(ls)`).
	// A finding that is not a simple command (an arithmetic command, a
	// [[ ]] test, a declaration) is shown as written.
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

	base string // Text with the command name reduced to its basename
	name string // the command name as written, after quote removal
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

	name string // the deciding command's name, as in Command
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
// against r: deny, then ask, then allow, then r.Unmatched (deny and ask
// rules match a command by its basename; an allow rule matches a command
// named with a "/" only when it names that path). These are ask whatever
// the rules say: a dynamic command (a name that is not a literal, eval,
// source of a non-literal file, a shell given a non-literal script);
// what evaluates text the line does not show as code (arithmetic or an
// indirection reading a variable the line gave text, ${x@P}, mapfile -C,
// compgen -C or -W, fc, declare -i); what rebinds a command name (alias,
// hash -p, enable -f); an assignment to a variable that changes what a
// later command runs (PATH, GIT_CONFIG_*, LD_PRELOAD…, see
// dangerousVars), however it is made; an unparsable line. The strictest
// verdict wins.
func (r *Rules) Check(line string) Decision {
	if r == nil {
		r = &Rules{}
	}
	// About one simple command per 16 bytes of a long line (115 in the
	// 2 KB line of BenchmarkCheck): growing the list dominated its
	// allocations.
	c := checker{rules: r, found: make([]Command, 0, 4+len(line)/16)}
	parsed := c.script(line, 0)
	c.resolveUses()
	return decide(c.found, parsed)
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
	return Decision{Verdict: d.Verdict, Commands: found, Command: d.Text, Rule: d.Rule, Reason: d.Reason, name: d.name}
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
			if r.allows(c.Text, c.name) {
				cmds[i].Verdict, cmds[i].Rule, cmds[i].Reason = Allow, r.raw, ""
				break
			}
		}
	}
	return decide(cmds, true)
}

// subcommand is a second word that names a subcommand (`git push`, `npm
// publish`), not an option, a file or a value. It is compiled at its first
// use, not at every conch process's start.
var subcommand = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z][a-z0-9-]*$`) })

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
		// The name as written, quoted when it must be: a command named
		// with a "/" is allowed only by a rule that names its path.
		name, rest := d.name, ""
		if r, ok := strings.CutPrefix(d.Command, name+" "); name != "" && ok {
			rest = r
		} else if name == "" || d.Command != name {
			name, rest, _ = strings.Cut(d.Command, " ")
		}
		q, err := syntax.Quote(name, syntax.LangBash)
		if err != nil {
			return Rule{}, false
		}
		prefix := q
		if w, _, _ := strings.Cut(rest, " "); subcommand().MatchString(w) {
			prefix += " " + w
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

// entry is the index in found of the first Command call added.
type entry struct {
	call  *syntax.CallExpr
	index int
}

type checker struct {
	rules *Rules
	found []Command
	// entries are the first Command each simple command added, which
	// what its words do (arithmetic fed by a variable…) may make ask.
	entries []entry
	// stack is the path from the statement being walked to the node
	// being visited, for naming the command a finding belongs to.
	stack []syntax.Node
	// Variables (see vars.go): those the line may have given text that
	// is not a number, those arithmetic or an indirection reads, and
	// whether the line declares a nameref (through which any variable
	// may be written).
	tainted  map[string]bool
	uses     []varUse
	namerefs bool
	// fill is the text xargs -I or find -exec puts into the words of
	// the command being checked, "" for none; appends is set when xargs
	// adds arguments of its own after them.
	fill    string
	appends bool
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
	fill, appends := c.fill, c.appends
	c.fill, c.appends = "", false // a script's own words are its own
	defer func() { c.fill, c.appends = fill, appends }()
	for st, err := range p.StmtsSeq(strings.NewReader(src)) {
		if err != nil || !parsed {
			parsed = false
			continue
		}
		syntax.Walk(st, func(n syntax.Node) bool {
			if n == nil {
				c.stack = c.stack[:len(c.stack)-1]
				return true
			}
			c.stack = append(c.stack, n)
			c.visit(n, depth)
			return true
		})
	}
	return parsed
}

// visit checks one node of the syntax tree; the walk goes on into its
// children.
func (c *checker) visit(n syntax.Node, depth int) {
	switch n := n.(type) {
	case *syntax.CallExpr:
		c.assigns(n.Assigns, n.Args)
		if len(n.Args) > 0 {
			c.entries = append(c.entries, entry{n, len(c.found)})
			c.command(n.Args, depth)
		}
	case *syntax.DeclClause:
		c.assigns(n.Args, nil)
		c.declClause(n)
	case *syntax.Assign:
		c.assignNode(n)
		if n.Index != nil {
			c.arith(n.Index)
		}
	case *syntax.ArrayElem:
		if n.Index != nil {
			c.arith(n.Index)
		}
	case *syntax.ArithmExp:
		c.arith(n.X)
	case *syntax.ArithmCmd:
		c.arith(n.X)
	case *syntax.LetClause:
		for _, x := range n.Exprs {
			c.arith(x)
		}
	case *syntax.CStyleLoop:
		for _, x := range []syntax.ArithmExpr{n.Init, n.Cond, n.Post} {
			if x != nil {
				c.arith(x)
			}
		}
	case *syntax.WordIter:
		c.forLoop(n)
	case *syntax.ParamExp:
		c.paramExp(n)
	case *syntax.BinaryTest:
		switch n.Op {
		case syntax.TsEql, syntax.TsNeq, syntax.TsLeq, syntax.TsGeq, syntax.TsLss, syntax.TsGtr:
			for _, x := range []syntax.TestExpr{n.X, n.Y} {
				if w, ok := x.(*syntax.Word); ok {
					c.arithWord(w)
				}
			}
		}
	case *syntax.UnaryTest:
		if w, ok := n.X.(*syntax.Word); ok && n.Op == syntax.TsVarSet {
			if _, reason := varName(w); reason != "" {
				c.ask(c.context(), reason)
			}
		}
	}
}

// forLoop: a for or select loop assigns its variable each word of its
// list (the positional parameters without one); select reads the
// choice.
func (c *checker) forLoop(n *syntax.WordIter) {
	numeric := n.InPos.IsValid()
	if len(c.stack) > 1 {
		if f, ok := c.stack[len(c.stack)-2].(*syntax.ForClause); ok && f.Select {
			numeric = false
		}
	}
	for _, w := range n.Items {
		numeric = numeric && numericWord(w)
	}
	c.assigned(n.Name.Value, numeric, c.context())
}

// paramExp checks a parameter expansion: its subscript and substring
// bounds are arithmetic; ${x@P} expands x's value as a prompt, which
// runs its command substitutions; ${!x} reads the variable x names
// (a subscript in that name is evaluated); ${x:=v} assigns x.
func (c *checker) paramExp(p *syntax.ParamExp) {
	if p.Index != nil {
		c.arith(p.Index)
	}
	if p.Slice != nil {
		for _, x := range []syntax.ArithmExpr{p.Slice.Offset, p.Slice.Length} {
			if x != nil {
				c.arith(x)
			}
		}
	}
	if p.Param == nil {
		return
	}
	if p.Excl && p.Names == 0 && p.Index == nil {
		c.use(p.Param.Value)
	}
	if p.Exp == nil {
		return
	}
	switch p.Exp.Op {
	case syntax.OtherParamOps:
		if s, _ := literal(p.Exp.Word); s == "P" {
			c.ask(c.context(), ReasonDynamic)
		}
	case syntax.AssignUnset, syntax.AssignUnsetOrNull:
		c.assigned(p.Param.Value, numericWord(p.Exp.Word), c.context())
	}
}

// context is the node a finding is attributed to: the innermost simple
// command, arithmetic command, let, [[ ]], loop, declaration or, failing
// those, statement being walked.
func (c *checker) context() syntax.Node {
	for i := len(c.stack) - 1; i >= 0; i-- {
		switch n := c.stack[i].(type) {
		case *syntax.CallExpr, *syntax.ArithmCmd, *syntax.LetClause, *syntax.TestClause,
			*syntax.ForClause, *syntax.DeclClause, *syntax.Stmt:
			return n
		}
	}
	return nil
}

// ask makes the command at asks for reason: the Command its simple
// command added (unless a rule denies it), else a new one showing it.
func (c *checker) ask(at syntax.Node, reason string) {
	if call, ok := at.(*syntax.CallExpr); ok {
		for j := len(c.entries) - 1; j >= 0; j-- {
			if e := c.entries[j]; e.call == call {
				if e.index < len(c.found) {
					c.found[e.index] = c.decided(c.found[e.index], reason)
					return
				}
				break
			}
		}
	}
	c.add(Command{Text: nodeText(at), Verdict: Ask, Reason: reason})
}

// nodeText is how a node is shown as a command: a simple command as its
// Command text, anything else as written.
func nodeText(n syntax.Node) string {
	if call, ok := n.(*syntax.CallExpr); ok && len(call.Args) > 0 {
		text, _ := commandText(call.Args)
		return text
	}
	if n == nil {
		return ""
	}
	p := printers.Get().(*syntax.Printer)
	defer printers.Put(p)
	var b strings.Builder
	if err := p.Print(&b, n); err != nil {
		return "?"
	}
	return strings.TrimSpace(b.String())
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
		if !dangerousVar(name) {
			continue
		}
		text := name + "="
		if len(args) > 0 {
			text, _ = commandText(args)
		}
		c.add(Command{Text: text, Verdict: Ask, Reason: assignmentReason(name)})
	}
}

// command records the simple command words and whatever it runs.
func (c *checker) command(words []*syntax.Word, depth int) {
	text, base := commandText(words)
	written, _ := literal(words[0])
	cmd := Command{Text: text, base: base, name: written}
	name, ok := commandName(words[0])
	if !ok || c.fill != "" && strings.Contains(printWord(words[0]), c.fill) {
		c.add(Command{Text: text, Verdict: Ask, Reason: ReasonDynamic})
		return
	}
	u := unwrap(name, words)
	if u.how == runsScript && c.fill != "" && strings.Contains(printWord(u.inner[0]), c.fill) {
		u.how = dynamic // xargs -I or find -exec writes the script
	}
	if u.how == shellNoScript && c.appends {
		u.how = dynamic // xargs gives bash -c its script
	}
	wrapper := cmd
	wrapper.Wrapper = true
	switch u.how {
	case notWrapper, shellNoScript:
		c.add(c.decided(c.match(cmd), c.builtin(name, words)))
	case dynamic:
		c.add(c.decided(c.match(cmd), ReasonDynamic))
	case wraps:
		c.add(c.decided(c.match(wrapper), c.wrapperAssigns(u.assigns)))
		if len(u.inner) > 0 {
			fill, appends := c.fill, c.appends
			if u.fill != "" {
				c.fill, c.appends = u.fill, u.appends
			} else if u.appends {
				c.appends = true
			}
			c.command(u.inner, depth)
			c.fill, c.appends = fill, appends
		}
	case runsScript:
		c.add(c.match(wrapper))
		src, _ := literal(u.inner[0])
		if depth >= maxDepth || !c.script(src, depth+1) {
			c.add(Command{Text: text, Verdict: Ask, Reason: ReasonUnparsable})
		}
	case findExec:
		c.add(c.match(cmd))
		fill, appends := c.fill, c.appends
		c.fill, c.appends = "{}", false
		for _, ws := range u.execs {
			c.command(ws, depth)
		}
		c.fill, c.appends = fill, appends
	}
}

// decided is cmd asking for reason, unless reason is "", a rule denies
// cmd or it asks already for a reason no session answer lifts.
func (c *checker) decided(cmd Command, reason string) Command {
	if reason != "" && cmd.Verdict < Deny && !(cmd.Verdict == Ask && cmd.Rule == "" && cmd.Reason != ReasonUnmatched) {
		cmd.Verdict, cmd.Rule, cmd.Reason, cmd.Wrapper = Ask, "", reason, false
	}
	return cmd
}

// wrapperAssigns checks the NAME=VALUE words of env, sudo or doas: the
// reason to ask for the first dangerous name, "" for none.
func (c *checker) wrapperAssigns(words []*syntax.Word) string {
	reason := ""
	for _, w := range words {
		s, ok := literal(w)
		if !ok {
			s = printWord(w)
		}
		name, value, _ := strings.Cut(s, "=")
		if dangerousVar(name) && reason == "" {
			reason = assignmentReason(name)
		}
		c.taintOnly(name, ok && numericString(value))
	}
	return reason
}

func (c *checker) add(cmd Command) { c.found = append(c.found, cmd) }

// match sets cmd's verdict from the rules.
func (c *checker) match(cmd Command) Command {
	if x, ok := c.rules.lookup(cmd.Text, cmd.base, cmd.name); ok {
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
// quote removal, other words as written, joined by single spaces. base
// is the same text with the first word reduced to its basename, which
// deny and ask rules match; it is text itself when the name has no "/".
func commandText(words []*syntax.Word) (text, base string) {
	var b strings.Builder
	if n := int(words[len(words)-1].End().Offset()) - int(words[0].Pos().Offset()); n > 0 {
		b.Grow(n)
	}
	name := ""
	for i, w := range words {
		if i > 0 {
			b.WriteByte(' ')
		}
		s, ok := literal(w)
		if !ok {
			s = printWord(w)
		} else if i == 0 {
			name = s
		}
		b.WriteString(s)
	}
	text = b.String()
	if !strings.Contains(name, "/") {
		return text, text
	}
	return text, path.Base(name) + text[len(name):]
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
