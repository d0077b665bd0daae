// Package rules decides whether a bash command line may run: every simple
// command a bash parser finds in the line is matched against deny, ask and
// allow rules, and the strictest answer wins.
//
// Parse the rules once, then Check each command line (see Example).
//
// Rules see the command line, not what a program it starts does: a script
// file, a Makefile or a Python one-liner can still do anything its user
// may. The sandbox, not the rules, is the boundary.
package rules

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"sync"

	"mvdan.cc/sh/v3/syntax"
)

// Verdict is what a rule or the checker says about a command. The order
// is the strictness: a larger Verdict wins.
type Verdict int

const (
	Allow Verdict = iota
	Ask
	Deny
)

func (v Verdict) String() string {
	switch v {
	case Allow:
		return "allow"
	case Ask:
		return "ask"
	case Deny:
		return "deny"
	}
	return fmt.Sprintf("Verdict(%d)", int(v))
}

// ParseUnmatched reads the verdict for commands no rule matches: "allow"
// or "ask" (denying everything unmatched is not offered: it would deny
// `cd` and `true`).
func ParseUnmatched(s string) (Verdict, error) {
	switch s {
	case "allow":
		return Allow, nil
	case "ask":
		return Ask, nil
	}
	return Allow, fmt.Errorf("expected \"allow\" or \"ask\", got %q", s)
}

type ruleKind int

const (
	exact  ruleKind = iota // Bash(git status)
	prefix                 // Bash(git push:*)
	glob                   // Bash(git * main)
)

// Rule is one parsed rule: Bash(<exact>), Bash(<prefix>:*) or
// Bash(<glob with *>).
//
// A rule's command is normalised like the commands it is matched against
// (see [Check]): its words are joined by single spaces after quote
// removal. An exact rule matches that text only; a prefix rule matches
// the prefix alone or followed by a space and anything (`git push:*`
// matches `git push` and `git push origin main`, not `git pushx`); in a
// glob rule each `*` matches any run of characters, spaces included, and
// the glob must match the whole text.
//
// Command names: a command named without a "/" is compared with the
// rule's name reduced to its basename (`Bash(/usr/bin/npm publish:*)`
// matches `npm publish`). A command named with a "/" is compared by its
// basename in deny and ask rules (`Bash(rm:*)` denies `/bin/rm` and
// `./rm`), and as written in allow rules ([Rule.Match]): `Bash(ls:*)`
// does not allow `./ls`, which may be any program.
type Rule struct {
	raw     string
	kind    ruleKind
	pattern string // the command, its name reduced to its basename
	full    string // the command, its name as written
	name    string // the basename every match starts with, "" for a glob starting with *
	written string // the name as written, "" when it is a glob or not a literal
}

// String returns the rule as it was written.
func (r Rule) String() string { return r.raw }

// Pattern is the rule's normalised command: `git push` for
// `Bash(git push:*)`, `git * main` for `Bash(git * main)`, `./gradlew
// build` for `Bash(./gradlew build)`.
func (r Rule) Pattern() string { return r.full }

// ParseRule parses one rule.
func ParseRule(s string) (Rule, error) {
	body, ok := strings.CutPrefix(s, "Bash(")
	if !ok || !strings.HasSuffix(body, ")") {
		return Rule{}, fmt.Errorf("rule %q: expected Bash(<command>), Bash(<prefix>:*) or Bash(<glob with *>)", s)
	}
	body = strings.TrimSuffix(body, ")")
	kind := exact
	if p, ok := strings.CutSuffix(body, ":*"); ok {
		kind, body = prefix, p
	}
	full, text, written, err := normaliseRule(body)
	if err != nil {
		return Rule{}, fmt.Errorf("rule %q: %w", s, err)
	}
	if strings.Contains(written, "*") {
		written = ""
	}
	if kind == exact && strings.Contains(text, "*") {
		kind = glob
	}
	name, _, _ := strings.Cut(text, " ")
	if strings.Contains(name, "*") {
		name = ""
	}
	return Rule{raw: s, kind: kind, pattern: text, full: full, name: name, written: written}, nil
}

// normaliseRule gives a rule's command the text a command line's simple
// command would have, so that `Bash(/bin/rm -rf:*)` and `Bash('git' push)`
// mean what they say: as written (full) and with the name reduced to its
// basename (base); written is the name after quote removal.
func normaliseRule(body string) (full, base, written string, err error) {
	if strings.TrimSpace(body) == "" {
		return "", "", "", errors.New("empty command")
	}
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(body), "")
	if err != nil {
		return "", "", "", fmt.Errorf("cannot parse: %w", err)
	}
	if len(f.Stmts) != 1 {
		return "", "", "", errors.New("a rule names one simple command")
	}
	st := f.Stmts[0]
	call, ok := st.Cmd.(*syntax.CallExpr)
	if !ok || st.Negated || st.Background || st.Coprocess || len(st.Redirs) > 0 || len(call.Assigns) > 0 || len(call.Args) == 0 {
		return "", "", "", errors.New("a rule names one simple command")
	}
	full, base = commandText(call.Args)
	written, _ = literal(call.Args[0])
	return full, base, written, nil
}

// Match reports whether the rule, as an allow rule, matches a simple
// command's text as [Check] builds it (its first word taken as the
// command's name): a command named with a "/" only when the rule names
// that path (or a glob of the rule matches it).
func (r Rule) Match(text string) bool {
	name, _, _ := strings.Cut(text, " ")
	return r.allows(text, name)
}

// allows is Match for a command whose name, as written, is name: a rule
// that names a command matches only that name (its basename for a
// command named without a "/", the same path for one named with it); a
// rule whose name is a glob matches the whole text.
func (r Rule) allows(text, name string) bool {
	slash := strings.Contains(name, "/")
	if r.written != "" {
		if slash && r.written != name || !slash && path.Base(r.written) != name {
			return false
		}
	}
	if slash {
		return r.matches(r.full, text)
	}
	return r.matches(r.pattern, text)
}

// matches matches text against pattern, this rule's kind of pattern.
func (r Rule) matches(pattern, text string) bool {
	switch r.kind {
	case exact:
		return text == pattern
	case prefix:
		rest, ok := strings.CutPrefix(text, pattern)
		return ok && (rest == "" || rest[0] == ' ')
	}
	return globMatch(pattern, text)
}

// globMatch matches s against a pattern whose only special character is
// `*`, in linear time (the classic backtrack-to-last-star loop).
func globMatch(pattern, s string) bool {
	p, i := 0, 0
	star, mark := -1, 0
	for i < len(s) {
		switch {
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, i
			p++
		case p < len(pattern) && pattern[p] == s[i]:
			p++
			i++
		case star >= 0:
			p = star + 1
			mark++
			i = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// Rules is a set of rules. The zero value allows everything. A Rules may
// be used by many goroutines at once, and must not be changed after its
// first Check.
type Rules struct {
	Deny, Ask, Allow []Rule
	// Unmatched is the verdict for a command no rule matches: Allow (the
	// default) or Ask.
	Unmatched Verdict

	once  sync.Once
	index ruleIndex
}

// ruleIndex finds the rules that can match a command by its name, so a
// line of a hundred commands is not matched against every rule each time.
type ruleIndex struct {
	byName map[string][]indexed
	any    []indexed // rules whose name is a glob
}

type indexed struct {
	rule    *Rule
	verdict Verdict
	order   int // position in Deny, Ask, Allow: the first rule wins a tie
}

func (r *Rules) buildIndex() {
	r.index.byName = map[string][]indexed{}
	order := 0
	for _, l := range []struct {
		rules []Rule
		v     Verdict
	}{{r.Deny, Deny}, {r.Ask, Ask}, {r.Allow, Allow}} {
		for i := range l.rules {
			x := indexed{rule: &l.rules[i], verdict: l.v, order: order}
			order++
			if n := l.rules[i].name; n != "" {
				r.index.byName[n] = append(r.index.byName[n], x)
			} else {
				r.index.any = append(r.index.any, x)
			}
		}
	}
}

// lookup returns the strictest rule matching a command, the first
// written among equals; ok is false when none matches. text is the
// command's text, base the same with its name reduced to its basename,
// name its name as written: deny and ask rules match base, allow rules
// text and name (see Rule).
func (r *Rules) lookup(text, base, cmdName string) (best indexed, ok bool) {
	r.once.Do(r.buildIndex)
	name, _, _ := strings.Cut(base, " ")
	for _, list := range [][]indexed{r.index.byName[name], r.index.any} {
		for _, x := range list {
			if ok && (x.verdict < best.verdict || x.verdict == best.verdict && x.order > best.order) {
				continue
			}
			if x.verdict == Allow && x.rule.allows(text, cmdName) || x.verdict != Allow && x.rule.matches(x.rule.pattern, base) {
				best, ok = x, true
			}
		}
	}
	return best, ok
}

// Parse builds Rules from the written rules and the unmatched setting (""
// means "allow"). The first bad rule is the error, naming its list.
func Parse(deny, ask, allow []string, unmatched string) (*Rules, error) {
	r := &Rules{}
	for _, l := range []struct {
		name string
		in   []string
		out  *[]Rule
	}{{"deny", deny, &r.Deny}, {"ask", ask, &r.Ask}, {"allow", allow, &r.Allow}} {
		for _, s := range l.in {
			rule, err := ParseRule(s)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", l.name, err)
			}
			*l.out = append(*l.out, rule)
		}
	}
	if unmatched != "" {
		v, err := ParseUnmatched(unmatched)
		if err != nil {
			return nil, fmt.Errorf("unmatched: %w", err)
		}
		r.Unmatched = v
	}
	return r, nil
}
