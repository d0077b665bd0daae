package rules

import (
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// dangerousVars change what a later command runs, or make an allowed
// program run a command or load code named in the variable, so assigning
// them (before a command, alone, through export, declare, env or sudo,
// or by read, printf -v, mapfile, getopts, wait -p, a for loop, ${X:=…}
// or a nameref) asks:
//   - the shell's own: PATH, BASH_ENV and ENV (a file a shell sources),
//     PROMPT_COMMAND and PS4 (run at every prompt, or every command
//     under set -x), BASH_ALIASES and BASH_CMDS (an alias or a hashed
//     path, as alias and hash -p);
//   - the dynamic loader's: LD_PRELOAD, LD_AUDIT, LD_LIBRARY_PATH;
//   - git's: every GIT_CONFIG* (configuration by environment, which can
//     set core.fsmonitor, core.pager, diff.external…), GIT_SSH*,
//     GIT_EXTERNAL_DIFF, GIT_PAGER, GIT_EDITOR, GIT_SEQUENCE_EDITOR,
//     GIT_ASKPASS, GIT_PROXY_COMMAND, GIT_EXEC_PATH (where git finds its
//     subcommands), GIT_DIR and GIT_COMMON_DIR (where it reads a
//     repository's configuration and hooks), GIT_TEMPLATE_DIR (hooks a
//     new repository gets), and HOME and XDG_CONFIG_HOME (where it reads
//     the user's configuration);
//   - programs every tool starts: PAGER, EDITOR, VISUAL, MANPAGER,
//     BROWSER, SSH_ASKPASS, SUDO_ASKPASS, LESSOPEN and LESSCLOSE (less
//     runs them on every file), TAR_OPTIONS (--to-command);
//   - interpreters' start-up code: NODE_OPTIONS (--require),
//     PYTHONSTARTUP, PERL5OPT (-M), RUBYOPT (-r), JAVA_TOOL_OPTIONS,
//     _JAVA_OPTIONS and JDK_JAVA_OPTIONS (-javaagent).
//
// Left out on purpose: module search paths (PYTHONPATH, NODE_PATH,
// PERL5LIB, RUBYLIB) and build tools' options (GOFLAGS, CC, MAKEFLAGS,
// RUSTC_WRAPPER): they are set every day (PYTHONPATH=src pytest), and the
// programs that read them run the project's code anyway.
var dangerousVars = map[string]bool{
	"PATH": true, "BASH_ENV": true, "ENV": true, "PROMPT_COMMAND": true, "PS4": true,
	"BASH_ALIASES": true, "BASH_CMDS": true,
	"LD_PRELOAD": true, "LD_AUDIT": true, "LD_LIBRARY_PATH": true,
	"GIT_EXTERNAL_DIFF": true, "GIT_PAGER": true, "GIT_EDITOR": true, "GIT_SEQUENCE_EDITOR": true,
	"GIT_ASKPASS": true, "GIT_PROXY_COMMAND": true, "GIT_EXEC_PATH": true, "GIT_DIR": true,
	"GIT_COMMON_DIR": true, "GIT_TEMPLATE_DIR": true, "HOME": true, "XDG_CONFIG_HOME": true,
	"PAGER": true, "EDITOR": true, "VISUAL": true, "MANPAGER": true, "BROWSER": true,
	"SSH_ASKPASS": true, "SUDO_ASKPASS": true, "LESSOPEN": true, "LESSCLOSE": true, "TAR_OPTIONS": true,
	"NODE_OPTIONS": true, "PYTHONSTARTUP": true, "PERL5OPT": true, "RUBYOPT": true,
	"JAVA_TOOL_OPTIONS": true, "_JAVA_OPTIONS": true, "JDK_JAVA_OPTIONS": true,
}

// dangerousVar reports whether assigning name asks (see dangerousVars).
func dangerousVar(name string) bool {
	return dangerousVars[name] || strings.HasPrefix(name, "GIT_CONFIG") || strings.HasPrefix(name, "GIT_SSH")
}

// assignmentReason is the reason for an assignment to a dangerous variable.
func assignmentReason(name string) string { return "assignment to " + name }

// bash evaluates a variable's value as an arithmetic expression wherever
// it meets the variable's name in arithmetic ($((x)), ((x)), let,
// declare -i, array subscripts, substring offsets, [[ x -eq y ]]), and
// evaluating an array subscript in that value expands it, command
// substitutions included: x='a[$(rm -rf ~)]'; echo $((x)) runs rm. The
// same happens to a name given with a subscript (test -v, read, printf
// -v, ${!x}) and to a value shown with ${x@P}. A command line can only
// plant such a value by assigning it, so the checker notes every
// variable the line assigns a value that is not a plain number (a
// tainted variable), and asks when arithmetic or an indirection reads
// one. A variable the line never assigns holds what the user's
// environment gave it.

// alwaysTainted are variables bash sets from text a command line
// controls: the last argument ($_), what read, mapfile and getopts read,
// [[ =~ ]]'s groups, the command being run.
var alwaysTainted = map[string]bool{
	"_": true, "REPLY": true, "MAPFILE": true, "OPTARG": true, "BASH_REMATCH": true,
	"BASH_ARGV": true, "BASH_COMMAND": true, "BASH_EXECUTION_STRING": true, "READLINE_LINE": true,
	"@": true, "*": true,
}

// varUse is a variable read by arithmetic or an indirection, decided
// once the whole line is walked (an assignment later in the line, or in
// a function defined later, may be what it reads).
type varUse struct {
	name string
	at   syntax.Node // what to show as the command that asks
}

// taint records that name may hold a value that is not a number.
func (c *checker) taint(name string) {
	if c.tainted == nil {
		c.tainted = map[string]bool{}
	}
	c.tainted[name] = true
}

// assigned records an assignment of value to name: a dangerous name
// asks (attributed to at), a value that is not a number taints name.
func (c *checker) assigned(name string, numeric bool, at syntax.Node) {
	if name == "" {
		return
	}
	if dangerousVar(name) {
		c.ask(at, assignmentReason(name))
	}
	if !numeric {
		c.taint(name)
	}
}

// isTainted reports whether a variable read by arithmetic may hold text
// the line planted.
func (c *checker) isTainted(name string) bool {
	if c.namerefs || alwaysTainted[name] || c.tainted[name] {
		return true
	}
	return name != "" && name[0] >= '0' && name[0] <= '9' // positional parameters
}

// resolveUses asks for each variable read by arithmetic that is tainted,
// once per place.
func (c *checker) resolveUses() {
	seen := map[syntax.Node]bool{}
	for _, u := range c.uses {
		if seen[u.at] || !c.isTainted(u.name) {
			continue
		}
		seen[u.at] = true
		c.ask(u.at, ReasonDynamic)
	}
}

// use notes that arithmetic (or an indirection) reads name.
func (c *checker) use(name string) {
	c.uses = append(c.uses, varUse{name: name, at: c.context()})
}

// arith checks an arithmetic expression: every variable it reads is a
// use, and a command substitution whose output it evaluates asks.
func (c *checker) arith(x syntax.ArithmExpr) {
	switch x := x.(type) {
	case *syntax.BinaryArithm:
		c.arith(x.X)
		c.arith(x.Y)
	case *syntax.UnaryArithm:
		c.arith(x.X)
	case *syntax.ParenArithm:
		c.arith(x.X)
	case *syntax.Word:
		c.arithWord(x)
	}
}

// arithWord checks a word whose value bash evaluates as arithmetic.
func (c *checker) arithWord(w *syntax.Word) {
	for _, p := range w.Parts {
		c.arithPart(p)
	}
}

func (c *checker) arithPart(p syntax.WordPart) {
	switch p := p.(type) {
	case *syntax.Lit:
		c.arithString(p.Value)
	case *syntax.SglQuoted:
		if p.Dollar {
			c.ask(c.context(), ReasonDynamic)
			return
		}
		c.arithString(p.Value)
	case *syntax.DblQuoted:
		for _, q := range p.Parts {
			c.arithPart(q)
		}
	case *syntax.ParamExp:
		if p.Length || p.Param == nil {
			return // ${#x} is a number
		}
		c.use(p.Param.Value)
		if p.Exp != nil && p.Exp.Word != nil {
			c.arithWord(p.Exp.Word)
		}
		if p.Repl != nil && p.Repl.With != nil {
			c.arithWord(p.Repl.With)
		}
	case *syntax.ArithmExp:
		// a number; its own expression is walked on its own
	default: // $(…), <(…), globs: text the line does not show
		c.ask(c.context(), ReasonDynamic)
	}
}

// arithString checks literal text that bash evaluates as arithmetic:
// a subscript or an expansion in it asks, and each name in it is a use.
func (c *checker) arithString(s string) {
	if strings.ContainsAny(s, "[$`") {
		c.ask(c.context(), ReasonDynamic)
		return
	}
	for i := 0; i < len(s); {
		if !nameByte(s[i]) {
			i++
			continue
		}
		j := i + 1
		for j < len(s) && nameByte(s[j]) {
			j++
		}
		if s[i] < '0' || s[i] > '9' { // not a number such as 0x1f or 16#ff
			if i == 0 || s[i-1] != '#' && (s[i-1] < '0' || s[i-1] > '9') {
				c.use(s[i:j])
			}
		}
		i = j
	}
}

// nameByte reports whether b can be part of a name (or of a number,
// which the caller tells apart by its first byte).
func nameByte(b byte) bool {
	return b == '_' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9'
}

// numericWord reports whether w's value is a plain number: digits (with
// a sign) and arithmetic expansions only. An empty value is 0.
func numericWord(w *syntax.Word) bool {
	if w == nil {
		return true
	}
	for _, p := range w.Parts {
		switch p := p.(type) {
		case *syntax.Lit:
			if !numericString(p.Value) {
				return false
			}
		case *syntax.ArithmExp:
		default:
			return false
		}
	}
	return true
}

// numericString reports whether s is a decimal number, optionally
// signed, or empty.
func numericString(s string) bool {
	s = strings.TrimLeft(s, "+-")
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// assignNode records the assignment a, as bash makes it in a prefix, a
// declaration or alone.
func (c *checker) assignNode(a *syntax.Assign) {
	if a.Name == nil {
		return // a declaration's option or quoted argument: see decl
	}
	if a.Naked && a.Value == nil && a.Array == nil {
		return // export X: no new value
	}
	numeric := numericWord(a.Value)
	if a.Array != nil {
		for _, e := range a.Array.Elems {
			numeric = numeric && numericWord(e.Value)
		}
	}
	c.taintOnly(a.Name.Value, numeric)
}

// taintOnly is assigned without the dangerous-name check, for the
// assignments whose danger is reported with their command's text.
func (c *checker) taintOnly(name string, numeric bool) {
	if !numeric {
		c.taint(name)
	}
}

// varName checks a word that bash takes as a variable's name, possibly
// with a subscript (read, printf -v, mapfile, test -v, declare, a
// nameref's target). It returns the name, or the reason to ask: the
// word is not a literal, or its subscript is anything but digits, @ or *
// (bash evaluates a subscript as arithmetic, expansions included).
func varName(w *syntax.Word) (name, reason string) {
	s, lit := literal(w)
	if !lit {
		return "", ReasonDynamic
	}
	return varNameString(s)
}

func varNameString(s string) (name, reason string) {
	name, sub, hasSub := strings.Cut(s, "[")
	if hasSub {
		sub = strings.TrimSuffix(sub, "]")
		if sub != "@" && sub != "*" && (sub == "" || !numericString(sub)) {
			return "", ReasonDynamic
		}
	}
	return name, ""
}

// written records a variable a builtin writes with text the line does
// not show (read, mapfile, printf -v, getopts, wait -p): the reason to
// ask for a name that is not a plain one or is dangerous; any other is
// tainted.
func (c *checker) written(w *syntax.Word) string {
	name, reason := varName(w)
	if reason != "" {
		return reason
	}
	if dangerousVar(name) {
		return assignmentReason(name)
	}
	c.taint(name)
	return ""
}
