package main

import (
	"fmt"
	"io"

	cfgfile "github.com/conch-dev/conch/internal/config"
	"github.com/conch-dev/conch/internal/sandbox"
)

// ruleKeys are the permission rule keys, in the order conch config
// prints them, with what each is when no file sets it.
var ruleKeys = []struct{ key, def string }{
	{"rules.deny", "[]"},
	{"rules.ask", "[]"},
	{"rules.allow", "[]"},
	{"rules.unmatched", `"allow"`},
}

// printRules writes the permission rules of the user's file, one key a
// line with its source like the other settings, then what the project
// file of dir adds (`rules.deny += […]`, `sandbox.deny_read += […]`) or
// narrows (`sandbox.mode = "read-only"`), which a session in dir gets.
// A project file that is refused, or that would widen the sandbox of
// mode and network, is the error, and nothing of the project is
// written.
func (s *settings) printRules(w io.Writer, dir string, mode sandbox.Mode, network sandbox.Network) error {
	proj, err := cfgfile.LoadProjectConfig(dir)
	if err == nil {
		err = proj.CheckSandbox(mode, network, "")
	}
	if err != nil {
		return err
	}
	for _, k := range ruleKeys {
		e, ok := s.ruleEntry(k.key)
		if !ok {
			fmt.Fprintf(w, "%s = %s  # default\n", k.key, k.def)
			continue
		}
		fmt.Fprintf(w, "%s = %s  # %s\n", k.key, entryValue(e), e.Where())
	}
	if len(proj.Entries) == 0 {
		fmt.Fprintf(w, "# project file: none in %s\n", dir)
		return nil
	}
	fmt.Fprintf(w, "# project file: %s\n", proj.Entries[0].File)
	for _, e := range proj.Entries {
		op := "+="
		if !e.Array { // sandbox.mode, sandbox.network: a narrower value
			op = "="
		}
		fmt.Fprintf(w, "%s %s %s  # %s\n", e.Key, op, entryValue(e), e.Where())
	}
	return nil
}

func (s *settings) ruleEntry(key string) (cfgfile.Entry, bool) {
	for _, e := range s.ruleEntries {
		if e.Key == key {
			return e, true
		}
	}
	return cfgfile.Entry{}, false
}

// entryValue is a file's value as TOML.
func entryValue(e cfgfile.Entry) string {
	if e.Array {
		return tomlList(e.Values)
	}
	return fmt.Sprintf("%q", e.Values[0])
}
