package main

import (
	"fmt"
	"io"

	cfgfile "github.com/conch-dev/conch/internal/config"
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
// line with its source like the other settings, then those the project
// file of dir adds (`rules.deny += […]`), which a session in dir gets.
// A project file that is refused is the error, and nothing of the
// project is written.
func (s *settings) printRules(w io.Writer, dir string) error {
	_, project, err := cfgfile.LoadProjectRules(dir)
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
	if len(project) == 0 {
		fmt.Fprintf(w, "# project file: none in %s\n", dir)
		return nil
	}
	fmt.Fprintf(w, "# project file: %s\n", project[0].File)
	for _, e := range project {
		fmt.Fprintf(w, "%s += %s  # %s\n", e.Key, entryValue(e), e.Where())
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
