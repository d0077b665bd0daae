package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	cfgfile "github.com/conch-dev/conch/internal/config"
	"github.com/conch-dev/conch/rules"
)

// The configuration file holds one key per setting flag (docs/configuration.md):
// the flag's name with "-" spelled "_", except the few that live in a
// table. Flags that shape one invocation rather than a deployment (conch
// run's --json, say) are not keys.
var (
	// tableKeys are the keys that do not follow the flag's name.
	tableKeys = map[string]string{
		"pass-env":            "env.pass",
		"containment":         "containment.mode",
		"sandbox":             "sandbox.mode",
		"network":             "sandbox.network.mode",
		"network-allow":       "sandbox.network.allow",
		"network-deny":        "sandbox.network.deny",
		"network-allow-local": "sandbox.network.allow_local",
		"network-ask":         "sandbox.network.ask",
		"writable-root":       "sandbox.writable_roots",
		"sandbox-escalation":  "sandbox.escalation",
		"deny-read":           "sandbox.deny_read",
		"max-pids":            "containment.max_pids",
		"max-memory":          "containment.max_memory",
		"unix-socket":         "sandbox.unix_sockets",
	}
	// notKeys are flags with no key (besides those of host tables:
	// isHostFlag).
	notKeys = []string{"config", "workdir", "json", "present", "background"}
)

// configKey is the configuration key of the flag named name, or "".
func configKey(name string) string {
	if slices.Contains(notKeys, name) || isHostFlag(name) {
		return ""
	}
	if k, ok := tableKeys[name]; ok {
		return k
	}
	return strings.ReplaceAll(name, "-", "_")
}

// source says where a setting's value came from, for `conch config`.
type source struct {
	what string // "default", "flag" or "file"
	at   string // the file's "<path>:<line>" for "file"
}

func (s source) String() string {
	if s.what == "file" {
		return s.at
	}
	return s.what
}

// settings is a subcommand's flags once the configuration file and the
// command line were applied, with where each value came from.
type settings struct {
	fs      *flag.FlagSet
	file    string            // the file read ("" when none)
	sources map[string]source // by flag name
	rules   *rules.Rules      // the file's permission rules (none: nil)
	// ruleEntries are the file's rules.* keys, for conch config.
	ruleEntries []cfgfile.Entry
	// clients are the named HTTP clients, [[mcp.clients]] (mcpclients.go).
	clients []mcpClient
}

// configPath finds --config in args (before "--"); "" means the default
// file, which may be absent. A --config with no value is left for the
// flag parser to refuse.
func configPath(args []string) (path string, explicit bool) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || name != "config" {
			continue
		}
		if hasValue {
			return value, true
		}
		if i+1 < len(args) {
			return args[i+1], true
		}
	}
	return cfgfile.DefaultPath(), false
}

// loadSettings parses args into fs, then applies the configuration file
// to the flags args did not set (flags win; a list given as flags
// replaces the file's). known reports whether a key belongs to any
// subcommand: a key of another subcommand (serve's http in conch run) is
// skipped, an unknown key is an error naming file, line and key. fs must
// define a "config" flag.
func loadSettings(fs *flag.FlagSet, args []string, known func(key string) bool) (*settings, error) {
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	s := &settings{fs: fs, sources: map[string]source{}}
	fs.Visit(func(f *flag.Flag) {
		if f.Name != "config" {
			s.sources[f.Name] = source{what: "flag"}
		}
	})
	path, explicit := configPath(args)
	if path == "" {
		return s, nil
	}
	entries, err := cfgfile.Load(path, !explicit)
	if err != nil {
		return nil, err
	}
	if entries != nil {
		s.file = path
	}
	if s.rules, err = cfgfile.Rules(entries); err != nil {
		return nil, err
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Key, "rules.") {
			s.ruleEntries = append(s.ruleEntries, e)
		}
	}
	return s, s.apply(entries, known)
}

func (s *settings) apply(entries []cfgfile.Entry, known func(string) bool) error {
	byKey := map[string]*flag.Flag{}
	s.fs.VisitAll(func(f *flag.Flag) {
		if k := configKey(f.Name); k != "" {
			byKey[k] = f
		}
	})
	for _, e := range entries {
		if e.Key == oldNetworkKey || e.Key == "sandbox.network.mode" {
			// --network has two keys: `[sandbox] network`, from before
			// the policy had a table of its own, still holds.
			if f, ok := byKey["sandbox.network.mode"]; ok {
				if prev := s.sources[f.Name]; prev.what == "file" {
					return &cfgfile.Error{File: e.File, Line: e.Line, Key: e.Key, Err: fmt.Errorf("the network mode is already set at %s", prev.at)}
				}
				byKey[e.Key] = f
			}
		}
		if handled, err := s.applyClientEntry(e); handled {
			if err != nil {
				return err
			}
			continue
		}
		if handled, err := s.applyHostEntry(e); handled {
			if err != nil {
				return err
			}
			continue
		}
		f, ok := byKey[e.Key]
		if !ok {
			if known(e.Key) {
				continue
			}
			return &cfgfile.Error{File: e.File, Line: e.Line, Key: e.Key, Err: errors.New("unknown key")}
		}
		list := isList(f)
		if e.Array && !list {
			return &cfgfile.Error{File: e.File, Line: e.Line, Key: e.Key, Err: errors.New("takes one value, not a list")}
		}
		if !e.Array && list {
			return &cfgfile.Error{File: e.File, Line: e.Line, Key: e.Key, Err: errors.New("takes a list of strings")}
		}
		if s.sources[f.Name].what == "flag" {
			continue // checked above, overridden by the flag
		}
		for _, v := range e.Values {
			if err := s.fs.Set(f.Name, v); err != nil {
				return &cfgfile.Error{File: e.File, Line: e.Line, Key: e.Key, Err: err}
			}
		}
		s.sources[f.Name] = source{what: "file", at: e.Where()}
	}
	return s.checkClients()
}

// listFlag is a flag that may be given several times; its key takes a
// TOML array.
type listFlag interface {
	flag.Value
	isList()
}

func isList(f *flag.Flag) bool { _, ok := f.Value.(listFlag); return ok }

// print writes the effective settings, one key a line with its source:
// `timeout_ms = 5000  # /home/u/.config/conch/config.toml:3`.
func (s *settings) print(w io.Writer) {
	if s.file != "" {
		fmt.Fprintf(w, "# configuration file: %s\n", s.file)
	} else {
		fmt.Fprintf(w, "# configuration file: none\n")
	}
	s.fs.VisitAll(func(f *flag.Flag) {
		k := configKey(f.Name)
		if k == "" {
			return
		}
		src, ok := s.sources[f.Name]
		if !ok {
			src = source{what: "default"}
		}
		if f.Name == "token" && f.Value.String() != "" {
			fmt.Fprintf(w, "%s = (set)  # %s\n", k, src)
			return
		}
		fmt.Fprintf(w, "%s = %s  # %s\n", k, tomlValue(f), src)
	})
	s.printHosts(w)
	s.printClients(w)
}

func tomlValue(f *flag.Flag) string {
	if lf, ok := f.Value.(interface{ Values() []string }); ok {
		return tomlList(lf.Values())
	}
	if bf, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && bf.IsBoolFlag() {
		return f.Value.String()
	}
	if _, ok := f.Value.(*number); ok {
		return f.Value.String()
	}
	return fmt.Sprintf("%q", f.Value.String())
}

// tomlList is a list of strings as a TOML array.
func tomlList(vals []string) string {
	quoted := make([]string, len(vals))
	for i, v := range vals {
		quoted[i] = fmt.Sprintf("%q", v)
	}
	return "[" + strings.Join(quoted, ", ") + "]"
}
