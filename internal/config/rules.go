package config

import (
	"errors"
	"slices"
	"strings"

	"github.com/conch-dev/conch/rules"
)

// Rules builds the permission rules from a file's keys rules.deny,
// rules.ask and rules.allow (lists of rules) and rules.unmatched ("allow"
// or "ask"); other keys are left to their owners. No rules keys means no
// rules (nil): everything is allowed. An error names the file, the line
// and the key.
func Rules(entries []Entry) (*rules.Rules, error) {
	r, found := &rules.Rules{}, false
	for _, e := range entries {
		found = found || strings.HasPrefix(e.Key, "rules.")
		var list *[]rules.Rule
		switch e.Key {
		case "rules.deny":
			list = &r.Deny
		case "rules.ask":
			list = &r.Ask
		case "rules.allow":
			list = &r.Allow
		case "rules.unmatched":
			if e.Array {
				return nil, &Error{File: e.File, Line: e.Line, Key: e.Key, Err: errors.New("takes one value, not a list")}
			}
			v, err := rules.ParseUnmatched(e.Values[0])
			if err != nil {
				return nil, &Error{File: e.File, Line: e.Line, Key: e.Key, Err: err}
			}
			r.Unmatched = v
			continue
		default:
			if strings.HasPrefix(e.Key, "rules.") {
				return nil, &Error{File: e.File, Line: e.Line, Key: e.Key, Err: errors.New("unknown key")}
			}
			continue
		}
		if !e.Array {
			return nil, &Error{File: e.File, Line: e.Line, Key: e.Key, Err: errors.New("takes a list of strings")}
		}
		for _, s := range e.Values {
			rule, err := rules.ParseRule(s)
			if err != nil {
				return nil, &Error{File: e.File, Line: e.Line, Key: e.Key, Err: err}
			}
			*list = append(*list, rule)
		}
	}
	if !found {
		return nil, nil
	}
	return r, nil
}

// ErrProjectKey is the cause of an Error for a key a project file may
// not hold.
var ErrProjectKey = errors.New("a project file may only add rules.deny and rules.ask")

// ProjectRules builds the rules a project file adds to the user's: it
// may hold rules.deny and rules.ask and nothing else, since a project
// (whoever wrote the repository) may only make commands stricter. Any
// other key, rules.allow and rules.unmatched included, is an error
// naming the file, the line and the key. No entries: nil.
func ProjectRules(entries []Entry) (*rules.Rules, error) {
	for _, e := range entries {
		if e.Key != "rules.deny" && e.Key != "rules.ask" {
			return nil, &Error{File: e.File, Line: e.Line, Key: e.Key, Err: ErrProjectKey}
		}
	}
	return Rules(entries)
}

// LoadProjectRules reads dir's project file (LoadProject) and builds its
// rules (ProjectRules); entries are the file's, for showing where each
// rule came from. No file: nil rules, no entries.
func LoadProjectRules(dir string) (proj *rules.Rules, entries []Entry, err error) {
	if entries, err = LoadProject(dir); err != nil {
		return nil, nil, err
	}
	if proj, err = ProjectRules(entries); err != nil {
		return nil, nil, err
	}
	return proj, entries, nil
}

// Narrow is user with the deny and ask rules of a project's proj added
// after its own (so that, among equal rules, the user's is the one
// named). Either may be nil; the result is a new Rules unless one is nil.
func Narrow(user, proj *rules.Rules) *rules.Rules {
	if proj == nil {
		return user
	}
	if user == nil {
		return &rules.Rules{Deny: proj.Deny, Ask: proj.Ask}
	}
	return &rules.Rules{
		Deny:      append(slices.Clip(user.Deny), proj.Deny...),
		Ask:       append(slices.Clip(user.Ask), proj.Ask...),
		Allow:     user.Allow,
		Unmatched: user.Unmatched,
	}
}
