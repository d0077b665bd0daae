package rules

import (
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// how a command runs other commands.
type how int

const (
	notWrapper    how = iota
	wraps             // inner is the command it runs (possibly none)
	runsScript        // inner[0] is a literal script it runs
	findExec          // execs are the commands of its -exec clauses
	dynamic           // what it runs is not known from the line
	shellNoScript     // a shell with -c but no script after it: an error, unless xargs adds one
)

type unwrapped struct {
	how   how
	inner []*syntax.Word
	execs [][]*syntax.Word
	// assigns are the NAME=VALUE words of env, sudo or doas.
	assigns []*syntax.Word
	// fill is the text xargs -I replaces in the words of the command it
	// runs; appends is set when xargs adds arguments after them instead.
	fill    string
	appends bool
}

// options describes a command's options: the short ones that take an
// argument and the long ones that take one when not written with `=`.
type options struct {
	short string
	long  []string
}

// skip returns the index of the first word at or after i that is not an
// option (after a `--`), or -1 when a word in the way is not a literal and
// so might be an option or the command.
func (o options) skip(words []*syntax.Word, i int) int {
	for i < len(words) {
		s, ok := literal(words[i])
		if !ok {
			return -1
		}
		if s == "--" {
			return i + 1
		}
		if len(s) < 2 || s[0] != '-' {
			return i
		}
		i++
		if strings.HasPrefix(s, "--") {
			if !strings.Contains(s, "=") && slices.Contains(o.long, s) {
				i++
			}
			continue
		}
		for j := 1; j < len(s); j++ {
			if strings.IndexByte(o.short, s[j]) >= 0 {
				if j == len(s)-1 {
					i++
				}
				break
			}
		}
	}
	return min(i, len(words))
}

// Wrappers whose command follows their options directly.
var simpleWrappers = map[string]options{
	"command": {},
	"builtin": {},
	"exec":    {short: "a"},
	"nohup":   {},
	"nice":    {short: "n", long: []string{"--adjustment"}},
	"time":    {short: "of", long: []string{"--output", "--format"}},
	"stdbuf":  {short: "ioe", long: []string{"--input", "--output", "--error"}},
}

// xargsOptions are xargs's options that take an argument.
var xargsOptions = options{short: "adEILnPs", long: []string{"--arg-file", "--delimiter", "--eof",
	"--max-lines", "--max-args", "--max-procs", "--max-chars", "--process-slot-var"}}

// Wrappers that take NAME=VALUE words between their options and command.
var assigningWrappers = map[string]options{
	"env":  {short: "uC", long: []string{"--unset", "--chdir"}},
	"sudo": {short: "ugCDprtUTR", long: []string{"--user", "--group", "--close-from", "--chdir", "--prompt", "--role", "--type", "--other-user", "--command-timeout", "--chroot", "--host"}},
	"doas": {short: "uC"},
}

var shells = map[string]bool{"bash": true, "sh": true, "zsh": true, "dash": true, "ksh": true, "mksh": true, "ash": true}

// unwrap says how the command words (named name) runs other commands.
func unwrap(name string, words []*syntax.Word) unwrapped {
	if o, ok := simpleWrappers[name]; ok {
		i := o.skip(words, 1)
		if i < 0 {
			return unwrapped{how: dynamic}
		}
		return unwrapped{how: wraps, inner: words[i:]}
	}
	if o, ok := assigningWrappers[name]; ok {
		return unwrapAssigning(name, o, words)
	}
	if shells[name] {
		return unwrapShell(words)
	}
	switch name {
	case "xargs":
		return unwrapXargs(words)
	case "timeout":
		i := options{short: "sk", long: []string{"--signal", "--kill-after"}}.skip(words, 1)
		if i < 0 {
			return unwrapped{how: dynamic}
		}
		return unwrapped{how: wraps, inner: words[min(i+1, len(words)):]}
	case "eval":
		return unwrapped{how: dynamic}
	case "source", ".":
		if len(words) > 1 {
			if f, ok := literal(words[1]); !ok || readsStdin(f) {
				return unwrapped{how: dynamic}
			}
		}
	case "trap":
		return unwrapTrap(words)
	case "find":
		return unwrapFind(words)
	}
	return unwrapped{how: notWrapper}
}

// unwrapAssigning handles env, sudo and doas: options, then NAME=VALUE
// words, then the command. env -S splits a string into a command line,
// and sudo -s or -i without a command runs a shell reading stdin: both
// are dynamic.
func unwrapAssigning(name string, o options, words []*syntax.Word) unwrapped {
	i := o.skip(words, 1)
	if i < 0 {
		return unwrapped{how: dynamic}
	}
	shellFlag := false
	for _, w := range words[1:i] {
		s, _ := literal(w)
		if !strings.HasPrefix(s, "-") { // an option's argument
			continue
		}
		long := strings.HasPrefix(s, "--")
		if name == "env" && (strings.HasPrefix(s, "--split-string") || !long && strings.ContainsRune(s, 'S')) {
			return unwrapped{how: dynamic}
		}
		if s == "--shell" || s == "--login" || !long && strings.ContainsAny(s, "si") {
			shellFlag = true
		}
	}
	start := i
	for ; i < len(words); i++ {
		s, ok := literal(words[i])
		if !ok {
			s = printWord(words[i]) // X="$HOME" is still an assignment
		}
		n, _, isAssign := strings.Cut(s, "=")
		if !isAssign || !isName(n) {
			break
		}
	}
	if i == len(words) && name != "env" && shellFlag {
		return unwrapped{how: dynamic}
	}
	return unwrapped{how: wraps, inner: words[i:], assigns: words[start:i]}
}

// unwrapXargs: xargs runs its command with the arguments it reads added
// after its words, or, with -I R (-i, --replace: R is {}), put in place
// of R in them.
func unwrapXargs(words []*syntax.Word) unwrapped {
	i := xargsOptions.skip(words, 1)
	if i < 0 {
		return unwrapped{how: dynamic}
	}
	u := unwrapped{how: wraps, appends: true}
	for j := 1; j < i; j++ {
		s, _ := literal(words[j])
		switch {
		case s == "--":
		case s == "-I" && j+1 < i:
			u.fill, _ = literal(words[j+1])
			j++
		case strings.HasPrefix(s, "-I"):
			u.fill = s[2:]
		case strings.HasPrefix(s, "-i"), strings.HasPrefix(s, "--replace"):
			u.fill = "{}"
			if r, ok := strings.CutPrefix(s, "-i"); ok && r != "" {
				u.fill = r
			} else if r, ok := strings.CutPrefix(s, "--replace="); ok {
				u.fill = r
			}
		}
	}
	if u.fill != "" {
		u.appends = false
	}
	u.inner = words[i:]
	if len(u.inner) == 0 { // xargs alone runs echo
		u.inner = nil
	}
	return u
}

func isName(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for _, r := range s {
		if r != '_' && (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') && (r < '0' || r > '9') {
			return false
		}
	}
	return true
}

// unwrapShell handles bash, sh, zsh…: with -c (alone or in a cluster such
// as -lc) the next word is the script; without it the first word is a
// script file (a command like any other) and no word at all, or -s, means
// the script comes from stdin.
func unwrapShell(words []*syntax.Word) unwrapped {
	hasC, stdin := false, false
	i := 1
	for i < len(words) {
		s, ok := literal(words[i])
		if !ok {
			return unwrapped{how: dynamic}
		}
		if s == "--" || s == "-" { // bash takes a lone - as --
			i++
			break
		}
		if len(s) < 2 || s[0] != '-' && s[0] != '+' {
			break
		}
		i++
		switch {
		case s == "--rcfile" || s == "--init-file":
			return unwrapped{how: dynamic} // an interactive shell sources it first
		case strings.HasPrefix(s, "--"):
		default:
			hasC = hasC || strings.ContainsRune(s[1:], 'c')
			stdin = stdin || strings.ContainsRune(s[1:], 's')
			if strings.ContainsAny(s[len(s)-1:], "oO") {
				i++
			}
		}
	}
	switch {
	case hasC:
		if i >= len(words) {
			return unwrapped{how: shellNoScript}
		}
		if _, ok := literal(words[i]); !ok {
			return unwrapped{how: dynamic}
		}
		return unwrapped{how: runsScript, inner: words[i : i+1]}
	case stdin || i >= len(words):
		return unwrapped{how: dynamic}
	}
	if f, _ := literal(words[i]); readsStdin(f) {
		return unwrapped{how: dynamic}
	}
	return unwrapped{how: notWrapper}
}

// readsStdin reports whether a script file named f is the standard
// input: its script is not on the command line.
func readsStdin(f string) bool {
	switch f {
	case "/dev/stdin", "/dev/fd/0", "/proc/self/fd/0":
		return true
	}
	return false
}

// unwrapTrap parses a trap's action: `trap '<script>' SIGNAL…`.
func unwrapTrap(words []*syntax.Word) unwrapped {
	i := options{}.skip(words, 1)
	if i < 0 {
		return unwrapped{how: dynamic}
	}
	if len(words)-i < 2 {
		return unwrapped{how: notWrapper}
	}
	s, ok := literal(words[i])
	if !ok {
		return unwrapped{how: dynamic}
	}
	if s == "-" {
		return unwrapped{how: notWrapper}
	}
	return unwrapped{how: runsScript, inner: words[i : i+1]}
}

// unwrapFind collects the commands of find's -exec, -execdir, -ok and
// -okdir clauses, each ending at `;` or `+`.
func unwrapFind(words []*syntax.Word) unwrapped {
	u := unwrapped{how: findExec}
	for i := 1; i < len(words); i++ {
		s, _ := literal(words[i])
		if s != "-exec" && s != "-execdir" && s != "-ok" && s != "-okdir" {
			continue
		}
		start := i + 1
		for i = start; i < len(words); i++ {
			if e, _ := literal(words[i]); e == ";" || e == "+" {
				break
			}
		}
		if i > start {
			u.execs = append(u.execs, words[start:i])
		}
	}
	return u
}
