// Package envpolicy builds the environment of a model's command: the
// server's environment without its secrets, defaults that stop the known
// interactive hangs, then the caller's variables and the managed overlay.
package envpolicy

import (
	"slices"
	"strings"
)

// Defaults stop pagers, colour codes, prompts and editors from waiting
// for a terminal that a model does not have.
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
}

// secretWords mark a variable as a credential wherever they appear in its
// name, in any case.
var secretWords = []string{"KEY", "PASSWORD", "SECRET", "TOKEN", "PASSPHRASE", "CREDENTIAL"}

// Scrubbed reports whether a variable of the server's environment must not
// reach a command: credentials, conch's own managed names (a stale
// CONCH_SESSION_ID must not leak into another session), variables that make
// a non-interactive bash read a file (BASH_ENV, ENV), and exported bash
// functions, which run code before the command does.
func Scrubbed(name string) bool {
	upper := strings.ToUpper(name)
	for _, w := range secretWords {
		if strings.Contains(upper, w) {
			return true
		}
	}
	return strings.HasPrefix(upper, "CONCH_") ||
		upper == "BASH_ENV" || upper == "ENV" ||
		strings.HasPrefix(name, "BASH_FUNC_")
}

// Base is the part of a command's environment that does not change from
// call to call: the server's environment minus scrubbed names, then the
// defaults. Compute it once per executor.
func Base(environ []string) []string {
	out := make([]string, 0, len(environ)+len(Defaults))
	for _, kv := range environ {
		name, _, ok := strings.Cut(kv, "=")
		if !ok || name == "" || Scrubbed(name) {
			continue
		}
		out = append(out, kv)
	}
	return overlay(out, Defaults)
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
