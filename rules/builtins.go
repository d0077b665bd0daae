package rules

import (
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// Builtins that evaluate text as code, rebind a command name or write a
// variable named by their arguments. Each was tried with bash 5.2 (see
// docs/rules.md); complete -C, bind -x and PROMPT_COMMAND act only in an
// interactive shell, which a command line never is, and unset, export,
// readonly, shift, return, exit, printf %d and test's -eq do not evaluate
// a subscript or an expression.

// builtin checks the words of a simple command named name (its basename)
// for what bash does with them beyond running it: the reason it asks, ""
// for none. Variables it writes are tainted.
func (c *checker) builtin(name string, words []*syntax.Word) string {
	args := words[1:]
	switch name {
	case "printf":
		// printf -v NAME: the output goes to the variable NAME.
		return c.optionArgs(args, "v", "v", c.written)
	case "read":
		// read [-a NAME] [NAME…]: the input goes to the variables.
		reason, rest := c.options(args, "adinNptu", "a", c.written)
		return first(reason, c.operands(rest, c.written))
	case "mapfile", "readarray":
		// -C CALLBACK is evaluated every -c lines.
		if hasOption(args, "dnOsuCc", 'C') {
			return ReasonDynamic
		}
		reason, rest := c.options(args, "dnOsuCc", "", nil)
		if len(rest) > 0 {
			reason = first(reason, c.written(rest[0]))
		}
		return reason
	case "getopts":
		if len(args) >= 2 {
			return c.written(args[1])
		}
	case "wait":
		return c.optionArgs(args, "p", "p", c.written)
	case "hash":
		// hash -p PATH NAME: NAME now runs PATH.
		if hasOption(args, "pt", 'p') {
			return ReasonDynamic
		}
	case "alias":
		// An alias replaces a command name with any text.
		for _, w := range args {
			if s, ok := literal(w); !ok || strings.Contains(s, "=") {
				return ReasonDynamic
			}
		}
	case "compgen":
		// -C runs a command; -W's word list is expanded, $(…) included.
		if hasOption(args, "ACFGPSWXo", 'C') || hasOption(args, "ACFGPSWXo", 'W') {
			return ReasonDynamic
		}
	case "enable":
		// enable -f FILE loads a shared object as a builtin.
		if hasOption(args, "fd", 'f') {
			return ReasonDynamic
		}
	case "fc":
		// fc runs commands from the history, which history -r or -s
		// fills with any text; fc -l only lists them.
		if !hasOption(args, "e", 'l') {
			return ReasonDynamic
		}
	case "test", "[":
		// test -v NAME evaluates NAME's subscript.
		for i, w := range args {
			if s, _ := literal(w); s == "-v" && i+1 < len(args) {
				if _, reason := varName(args[i+1]); reason != "" {
					return reason
				}
			}
		}
	case "let":
		// let through a wrapper (builtin let …): each argument is an
		// arithmetic expression.
		for _, w := range args {
			c.arithWord(w)
		}
	case "declare", "typeset", "local", "export", "readonly":
		// declare through a wrapper (command export PATH=…).
		return c.declWords(name, args)
	}
	return ""
}

// first is the first reason of reasons that is not "".
func first(reasons ...string) string {
	for _, r := range reasons {
		if r != "" {
			return r
		}
	}
	return ""
}

// options walks a builtin's leading options (up to a word that does not
// start with "-", or after "--"): withArg are the letters that take an
// argument (attached or the next word). For the letters in check, each
// argument is given to f; the first reason f gives is returned, with the
// words after the options. A word that is not a literal ends the options
// as an operand would.
func (c *checker) options(args []*syntax.Word, withArg, check string, f func(*syntax.Word) string) (reason string, rest []*syntax.Word) {
	i := 0
	for i < len(args) {
		s, ok := literal(args[i])
		if !ok || len(s) < 2 || s[0] != '-' {
			break
		}
		i++
		if s == "--" {
			break
		}
		for j := 1; j < len(s); j++ {
			if strings.IndexByte(withArg, s[j]) < 0 {
				continue
			}
			var arg *syntax.Word
			if j < len(s)-1 {
				arg = &syntax.Word{Parts: []syntax.WordPart{&syntax.Lit{Value: s[j+1:]}}}
			} else if i < len(args) {
				arg = args[i]
				i++
			}
			if arg != nil && strings.IndexByte(check, s[j]) >= 0 && f != nil {
				reason = first(reason, f(arg))
			}
			break
		}
	}
	return reason, args[i:]
}

// optionArgs is options for the reason alone.
func (c *checker) optionArgs(args []*syntax.Word, withArg, check string, f func(*syntax.Word) string) string {
	reason, _ := c.options(args, withArg, check, f)
	return reason
}

// operands gives each word to f, returning the first reason.
func (c *checker) operands(words []*syntax.Word, f func(*syntax.Word) string) string {
	reason := ""
	for _, w := range words {
		reason = first(reason, f(w))
	}
	return reason
}

// hasOption reports whether the leading options of args (withArg as in
// options) hold the letter opt.
func hasOption(args []*syntax.Word, withArg string, opt byte) bool {
	for i := 0; i < len(args); i++ {
		s, ok := literal(args[i])
		if !ok {
			return true // might be the option
		}
		if len(s) < 2 || s[0] != '-' || s == "--" {
			return false
		}
		for j := 1; j < len(s); j++ {
			if s[j] == opt {
				return true
			}
			if strings.IndexByte(withArg, s[j]) >= 0 {
				if j == len(s)-1 {
					i++
				}
				break
			}
		}
	}
	return false
}

// declClause checks declare, typeset, local, export and readonly as the
// parser gives them: -i makes every later assignment to the names
// arithmetic (ask); -n makes a name a reference to the variable its
// value names (a dangerous or subscripted target asks, and any variable
// may then be written through it); a quoted or non-literal argument may
// be any assignment.
func (c *checker) declClause(n *syntax.DeclClause) {
	variant := n.Variant.Value
	nameref := variant == "nameref"
	for _, a := range n.Args {
		if a.Name != nil || a.Value == nil {
			continue
		}
		if s, ok := literal(a.Value); ok && len(s) > 1 && s[0] == '-' {
			if reason := declFlags(variant, s, &nameref); reason != "" {
				c.ask(n, reason)
			}
		}
	}
	if nameref {
		c.namerefs = true
	}
	for _, a := range n.Args {
		switch {
		case a.Name != nil && nameref:
			if a.Value == nil {
				c.ask(n, ReasonDynamic) // a reference without a target
				continue
			}
			target, ok := literal(a.Value)
			if !ok {
				c.ask(n, ReasonDynamic)
				continue
			}
			c.askFor(n, declTarget(target))
		case a.Name == nil && a.Value != nil:
			s, ok := literal(a.Value)
			if !ok {
				c.ask(n, ReasonDynamic)
				continue
			}
			if s != "" && (s[0] == '-' || s[0] == '+') {
				continue // an option
			}
			c.askFor(n, c.declArg(s, nameref, false))
		}
	}
}

// askFor is ask when reason is not "".
func (c *checker) askFor(at syntax.Node, reason string) {
	if reason != "" {
		c.ask(at, reason)
	}
}

// declFlags reads a declaration's option word, noting -n in nameref; the
// reason to ask for -i.
func declFlags(variant, s string, nameref *bool) string {
	if s[0] != '-' {
		return ""
	}
	if strings.ContainsRune(s, 'n') && variant != "export" { // export -n unexports
		*nameref = true
	}
	if strings.ContainsRune(s, 'i') {
		return ReasonDynamic
	}
	return ""
}

// declTarget is the reason a nameref's target asks: a subscript, or a
// dangerous name (writing the reference writes it).
func declTarget(target string) string {
	name, reason := varNameString(target)
	if reason != "" {
		return reason
	}
	if dangerousVar(name) {
		return assignmentReason(name)
	}
	return ""
}

// declArg checks one literal argument of a declaration, NAME or
// NAME=VALUE; an assignment to a dangerous name asks when danger is set
// (for a DeclClause, assigns reports it with its text).
func (c *checker) declArg(s string, nameref, danger bool) string {
	lhs, value, isAssign := strings.Cut(s, "=")
	name, reason := varNameString(lhs)
	if reason != "" {
		return reason
	}
	if nameref && isAssign {
		return declTarget(value)
	}
	if isAssign {
		if danger && dangerousVar(name) {
			return assignmentReason(name)
		}
		c.taintOnly(name, numericString(value))
	}
	return ""
}

// declWords checks a declaration reached as a simple command's words
// (through builtin or command): its options, then NAME[=VALUE] words.
func (c *checker) declWords(variant string, args []*syntax.Word) string {
	nameref, reason := false, ""
	i := 0
	for ; i < len(args); i++ {
		s, ok := literal(args[i])
		if !ok {
			return ReasonDynamic
		}
		if len(s) < 2 || s[0] != '-' && s[0] != '+' {
			break
		}
		reason = first(reason, declFlags(variant, s, &nameref))
	}
	if nameref {
		c.namerefs = true
	}
	for _, w := range args[i:] {
		s, ok := literal(w)
		if !ok {
			return ReasonDynamic
		}
		if nameref && !strings.Contains(s, "=") {
			reason = first(reason, ReasonDynamic) // a reference without a target
			continue
		}
		reason = first(reason, c.declArg(s, nameref, true))
	}
	return reason
}
