// Package envpolicy builds the environment of a model's command: the
// server's environment without its secrets, defaults that stop the known
// interactive hangs, then the caller's variables and the managed overlay.
package envpolicy

import (
	"regexp"
	"slices"
	"strings"
	"sync"
)

// Defaults stop pagers, colour codes, prompts and editors from waiting
// for a terminal that a model does not have, and make Python flush its
// output as it goes (a background program's output would otherwise sit
// in its buffer until it exits).
var Defaults = []string{
	"NO_COLOR=1",
	"TERM=dumb",
	"PAGER=cat",
	"GIT_PAGER=cat",
	"GIT_TERMINAL_PROMPT=0",
	"GIT_EDITOR=true",
	"EDITOR=true",
	"VISUAL=true",
	"GH_PAGER=cat",
	"MANPAGER=cat",
	"DEBIAN_FRONTEND=noninteractive",
	"PYTHONUNBUFFERED=1",
}

// How a name rule compares its text with a variable's upper-cased name.
type nameMatch int

const (
	contains nameMatch = iota
	prefix
	suffix
	equal
	word // one of the name's parts between underscores: PAT in GITHUB_PAT, not in PATH
)

// nameRules are the variable names a command must not inherit, compared
// without regard to case. A rule does not apply to a name that starts
// with one of its except prefixes or equals one of them.
//
// The first groups mark credentials (the last of them, wave three's,
// each reached commands: GITHUB_PAT, DB_PASS, AUTHORIZATION…);
// DOCKER_HOST and CONTAINER_HOST point at a container daemon, which is
// root on the machine it runs on: without them docker and podman fall
// back to the local socket, which the sandbox denies unless the user
// lists it. CONCH_* are conch's own managed names (a stale
// CONCH_SESSION_ID must not leak into another session); the last group
// runs code or reads files before the command does (BASH_ENV and ENV
// name a file a non-interactive bash sources, exported functions arrive
// as BASH_FUNC_*, SHELLOPTS=xtrace with PS4='$(cmd)' runs cmd before
// every command, and the others change how every command line is read).
var nameRules = []struct {
	match  nameMatch
	text   string
	except []string
}{
	{match: contains, text: "KEY"},
	{match: contains, text: "PASSWORD"},
	{match: contains, text: "SECRET"},
	{match: contains, text: "TOKEN"},
	{match: contains, text: "PASSPHRASE"},
	{match: contains, text: "CREDENTIAL"},
	{match: contains, text: "PASSWD"},
	{match: contains, text: "COOKIE"},
	{match: contains, text: "WEBHOOK"},
	{match: contains, text: "PRIVATE_KEY"},
	{match: contains, text: "AUTH_"},
	{match: suffix, text: "_AUTH"},
	{match: suffix, text: "_PWD"},
	{match: suffix, text: "_DSN"},
	{match: suffix, text: "_JWT"},
	{match: equal, text: "AUTH"},
	{match: equal, text: "DSN"},
	{match: equal, text: "JWT"},
	{match: equal, text: "PGPASSFILE"},
	{match: equal, text: "PGPASS"},

	{match: word, text: "PAT"},
	{match: word, text: "PASS"},
	{match: contains, text: "AUTHORIZATION"},
	{match: contains, text: "BEARER"},
	// A desktop's session names are not credentials.
	{match: contains, text: "SESSION", except: []string{"XDG_SESSION_", "DBUS_SESSION_", "DESKTOP_SESSION", "SESSION_MANAGER"}},
	{match: contains, text: "PRIVATE"},

	{match: equal, text: "DOCKER_HOST"},
	{match: equal, text: "CONTAINER_HOST"},

	{match: prefix, text: "CONCH_"},

	{match: equal, text: "BASH_ENV"},
	{match: equal, text: "ENV"},
	{match: prefix, text: "BASH_FUNC_"},
	{match: equal, text: "SHELLOPTS"},
	{match: equal, text: "BASHOPTS"},
	{match: equal, text: "PS4"},
	{match: equal, text: "PROMPT_COMMAND"},
	{match: equal, text: "BASH_XTRACEFD"},
	{match: equal, text: "CDPATH"},
	{match: equal, text: "GLOBIGNORE"},
}

// valueRules are secrets recognised by their value, whatever the name of
// the variable that holds them. A token must start the value or follow a
// character that cannot be part of it, so that "disk-…" is not "sk-…".
// They are compiled on first use: every start of conch (its inits and
// agents too) would pay for them in its package initialisation.
var valueRules = sync.OnceValue(func() []*regexp.Regexp {
	return []*regexp.Regexp{
		// A URL with a password: scheme://user:password@host (user may be
		// empty, as in redis://:password@host).
		regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^/?#@\s:]*:[^/?#@\s]+@`),
		// A PEM private key of any kind.
		regexp.MustCompile(`-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----`),
		// The well-known token shapes: OpenAI/Anthropic, GitHub, GitLab,
		// Slack, AWS access key ids, Google API keys, Hugging Face, npm,
		// Stripe (secret and restricted keys, live and test).
		regexp.MustCompile(`(?:^|[^A-Za-z0-9_-])(?:` +
			`sk-[A-Za-z0-9_-]{20,}` +
			`|gh[pousr]_[A-Za-z0-9]{20,}` +
			`|github_pat_[A-Za-z0-9_]{20,}` +
			`|glpat-[A-Za-z0-9_-]{20,}` +
			`|xox[abprs]-[A-Za-z0-9-]{10,}` +
			`|AKIA[A-Z0-9]{16}(?:$|[^A-Za-z0-9])` +
			`|AIza[A-Za-z0-9_-]{35}` +
			`|hf_[A-Za-z]{30,}` +
			`|npm_[A-Za-z0-9]{36}(?:$|[^A-Za-z0-9])` +
			`|[rs]k_(?:live|test)_[A-Za-z0-9]{16,})`),
		// A secret in a connection string (Azure storage and service bus,
		// ADO.NET): a key or password field at the start or after a ";".
		regexp.MustCompile(`(?i)(?:^|;)\s*(?:AccountKey|SharedAccessKey|Password|Pwd)\s*=\s*[^;\s]`),
	}
})

// Scrubbed reports whether the server's variable name=value must not
// reach a command: its name matches a name rule or its value holds a
// recognisable secret.
func Scrubbed(name, value string) bool {
	upper := strings.ToUpper(name)
	for _, r := range nameRules {
		if matchName(r.match, r.text, upper) && !excepted(upper, r.except) {
			return true
		}
	}
	for _, re := range valueRules() {
		if re.MatchString(value) {
			return true
		}
	}
	return false
}

// matchName compares an upper-cased name with a rule's text.
func matchName(m nameMatch, text, upper string) bool {
	switch m {
	case contains:
		return strings.Contains(upper, text)
	case prefix:
		return strings.HasPrefix(upper, text)
	case suffix:
		return strings.HasSuffix(upper, text)
	case equal:
		return upper == text
	}
	for part := range strings.SplitSeq(upper, "_") {
		if part == text {
			return true
		}
	}
	return false
}

// excepted reports whether name starts with (or is) one of except.
func excepted(upper string, except []string) bool {
	for _, e := range except {
		if strings.HasPrefix(upper, e) {
			return true
		}
	}
	return false
}

// Base is the part of a command's environment that does not change from
// call to call: the server's environment minus scrubbed variables, then
// the defaults. A variable named in pass is kept although a rule matches
// it (the user, never the model, lets it through). Base also returns the
// names it dropped, sorted and without repeats, so that the server can
// say which they are without revealing a value. Compute it once per
// executor.
func Base(environ, pass []string) (base, scrubbed []string) {
	base = make([]string, 0, len(environ)+len(Defaults))
	for _, kv := range environ {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			continue
		}
		if !slices.Contains(pass, name) && Scrubbed(name, value) {
			scrubbed = append(scrubbed, name)
			continue
		}
		base = append(base, kv)
	}
	slices.Sort(scrubbed)
	return overlay(base, Defaults), slices.Compact(scrubbed)
}

// Build is the environment of a command that runs in dir: base, then
// PWD=dir (replacing the server's own PWD; "" leaves base's), then env,
// then managed; a later layer wins. An entry of env survives even if its
// name would be scrubbed: the caller set it on purpose. With nothing to
// layer, Build returns base itself; otherwise base is not modified.
func Build(base []string, dir string, env, managed map[string]string) []string {
	if dir == "" && len(env) == 0 && len(managed) == 0 {
		return base
	}
	out := make([]string, 0, len(base)+1+len(env)+len(managed))
	out = append(out, base...)
	if dir != "" {
		out = overlay(out, []string{"PWD=" + dir})
	}
	out = overlay(out, pairs(env))
	return overlay(out, pairs(managed))
}

// overlay sets each NAME=VALUE of top in list: every earlier entry of the
// same name is dropped (a duplicate would shadow the new value in some
// programs) and the new one is appended.
func overlay(list, top []string) []string {
	for _, kv := range top {
		name, _, _ := strings.Cut(kv, "=")
		prefix := name + "="
		list = slices.DeleteFunc(list, func(e string) bool { return strings.HasPrefix(e, prefix) })
		list = append(list, kv)
	}
	return list
}

// pairs turns a map into NAME=VALUE entries in name order, so that the
// environment is the same from run to run.
func pairs(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}
