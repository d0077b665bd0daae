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
