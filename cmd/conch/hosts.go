package main

import (
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"strings"

	cfgfile "github.com/conch-dev/conch/internal/config"
	"github.com/conch-dev/conch/shell/remote"
	"github.com/conch-dev/conch/shell/remote/sshhost"
	"github.com/conch-dev/conch/tools"
)

// Remote hosts are configured as tables, `[hosts.<name>]` with `ssh` and
// `cwd`, or with the repeatable flags --host NAME=SSH and
// --host-cwd NAME=DIR; a --host flag replaces the file's hosts.

// hostFields maps a host table's keys to their flags.
var hostFields = map[string]string{"ssh": "host", "cwd": "host-cwd"}

// hostName is what a host may be called: the model sees it, in the bash
// tool's host enum and in task kinds (bash@<name>).
var hostName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// hostValues is a repeatable NAME=VALUE flag.
type hostValues struct {
	what string // "an SSH destination", "a directory": for the message
	vals []string
	by   map[string]string
}

func (h *hostValues) String() string {
	if h == nil {
		return ""
	}
	return strings.Join(h.vals, ",")
}

func (h *hostValues) Set(s string) error {
	name, v, ok := strings.Cut(s, "=")
	switch {
	case !ok || v == "":
		return fmt.Errorf("must be NAME=%s", strings.ToUpper(strings.ReplaceAll(h.what, " ", "_")))
	case !hostName.MatchString(name):
		return fmt.Errorf("host name %q must be letters, digits, '.', '_' or '-'", name)
	case name == tools.HostLocal:
		return errors.New(`"local" is this machine; name the host otherwise`)
	case h.by[name] != "":
		return fmt.Errorf("host %s is given twice", name)
	}
	if h.by == nil {
		h.by = map[string]string{}
	}
	h.by[name] = v
	h.vals = append(h.vals, s)
	return nil
}

func (h *hostValues) isList()          {}
func (h *hostValues) Values() []string { return h.vals }

// applyHostEntry applies a `hosts.<name>.<field>` key of the file to its
// flag; it reports false for any other key. As for every list, flags
// given on the command line win over the file.
func (s *settings) applyHostEntry(e cfgfile.Entry) (bool, error) {
	rest, ok := strings.CutPrefix(e.Key, "hosts.")
	if !ok {
		return false, nil
	}
	i := strings.LastIndexByte(rest, '.')
	if i < 0 || hostFields[rest[i+1:]] == "" {
		return true, &cfgfile.Error{File: e.File, Line: e.Line, Key: e.Key, Err: errors.New("unknown key (a host takes ssh and cwd)")}
	}
	name, flagName := rest[:i], hostFields[rest[i+1:]]
	if e.Array {
		return true, &cfgfile.Error{File: e.File, Line: e.Line, Key: e.Key, Err: errors.New("takes one value, not a list")}
	}
	f := s.fs.Lookup(flagName)
	if f == nil || s.sources[flagName].what == "flag" {
		return true, nil
	}
	if err := f.Value.Set(name + "=" + e.Values[0]); err != nil {
		return true, &cfgfile.Error{File: e.File, Line: e.Line, Key: e.Key, Err: err}
	}
	s.sources[flagName] = source{what: "file", at: e.Where()}
	s.sources[flagName+":"+name] = s.sources[flagName] // each host's own line, for conch config
	return true, nil
}

// remoteHosts builds an executor per configured host. They connect on
// first use; what runs there is held to this server's timeouts.
func (c *config) remoteHosts() ([]tools.Host, []*remote.Executor, error) {
	for name, cwd := range c.hostCwds.by {
		if c.hosts.by[name] == "" {
			return nil, nil, fmt.Errorf("--host-cwd %s: no host %s is configured", name, name)
		}
		if !path.IsAbs(cwd) {
			return nil, nil, fmt.Errorf("--host-cwd %s: %q is not an absolute path", name, cwd)
		}
	}
	var (
		hosts []tools.Host
		exs   []*remote.Executor
	)
	for _, spec := range c.hosts.vals {
		name, ssh, _ := strings.Cut(spec, "=")
		ex, err := sshhost.New(sshhost.Host{Name: name, SSH: ssh, Cwd: c.hostCwds.by[name]}, &sshhost.Options{
			AgentArgs: []string{"--grace", c.graceMs.millis().String()},
			Executor:  remote.Options{Timeout: c.timeoutMs.millis(), MaxTimeout: c.maxTimeoutMs.millis()},
		})
		if err != nil {
			for _, ex := range exs {
				ex.Close()
			}
			return nil, nil, err
		}
		hosts = append(hosts, tools.Host{Name: name, Executor: ex, Cwd: c.hostCwds.by[name]})
		exs = append(exs, ex)
	}
	return hosts, exs, nil
}

// printHosts writes the configured hosts as their table keys, for
// `conch config`.
func (s *settings) printHosts(w io.Writer) {
	for field, flagName := range map[string]string{"ssh": "host", "cwd": "host-cwd"} {
		f := s.fs.Lookup(flagName)
		if f == nil {
			continue
		}
		for _, v := range f.Value.(*hostValues).vals {
			name, val, _ := strings.Cut(v, "=")
			src, ok := s.sources[flagName+":"+name]
			if !ok {
				src = s.sources[flagName]
			}
			fmt.Fprintf(w, "hosts.%s.%s = %q  # %s\n", name, field, val, src)
		}
	}
}
