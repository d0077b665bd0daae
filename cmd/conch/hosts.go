package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/conch-dev/conch/internal/agent"
	cfgfile "github.com/conch-dev/conch/internal/config"
	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/shell/remote"
	"github.com/conch-dev/conch/tools"
)

// Remote hosts are configured as tables, `[hosts.<name>]` with the
// target key of one transport (`ssh`, `podman`, `image` with `engine`,
// …: the registry, hosttransports.go) and `cwd`, `sandbox`, `network` and
// `containment`, or with the repeatable flags of those keys: --host
// NAME=SSH, --host-podman NAME=CONTAINER, …, --host-cwd NAME=DIR,
// --host-sandbox NAME=MODE, --host-network NAME=MODE and
// --host-containment NAME=MODE; a flag replaces the file's hosts of its
// key (docs/remote.md).

// hostExecutor is a configured host's executor: a remote.Executor, or a
// container.Template that holds one per session.
type hostExecutor interface {
	shell.Executor
	Hello(context.Context) (agent.Hello, error)
}

// addHostFlags registers the flags of remote hosts: those of every
// registered transport's keys, and those every host takes.
func (c *config) addHostFlags(fs *flag.FlagSet) {
	c.transportKeys = map[string]*hostValues{}
	var targets []*hostValues
	for _, t := range hostTransports {
		for _, k := range t.targets {
			v := &hostValues{what: k.what, from: k.from}
			c.transportKeys[k.key] = v
			targets = append(targets, v)
			fs.Var(v, k.flag, k.usage)
		}
		for _, k := range t.extras {
			c.transportKeys[k.key] = &hostValues{what: k.what, from: k.from}
			fs.Var(c.transportKeys[k.key], k.flag, k.usage)
		}
	}
	// A host has one transport: every target key's flag is a peer of
	// the others'.
	for _, v := range targets {
		v.peers = slices.DeleteFunc(slices.Clone(targets), func(p *hostValues) bool { return p == v })
	}
	c.hostCwds = hostValues{what: "dir"}
	c.hostSandbox = hostValues{what: "mode", from: sandboxModes}
	c.hostNetwork = hostValues{what: "network", from: networkModes}
	c.hostContainment = hostValues{what: "mode", from: containmentModes}
	fs.Var(&c.hostCwds, "host-cwd", "default working directory on a remote host, `NAME=DIR` (default: the remote user's home, or the container user's; repeatable)")
	fs.Var(&c.hostSandbox, "host-sandbox", "the sandbox of a remote host, `NAME=MODE` (default: --sandbox when given, else workspace-write with the host's working directory as the workspace; repeatable)")
	fs.Var(&c.hostNetwork, "host-network", "how commands on a remote host reach the network, `NAME=MODE` with a mode of --network (default: --network when given, else the agent's default, public, degraded to on where that host cannot enforce it; repeatable)")
	fs.Var(&c.hostContainment, "host-containment", "the containment of a remote host, `NAME=MODE` (default: --containment when given, else auto; repeatable)")
}

// hostName is what a host may be called: the model sees it, in the bash
// tool's host enum and in task kinds (bash@<name>). Compiled at its first
// use, not at every conch process's start (inits and agents included).
var hostName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`) })

// hostValues is a repeatable NAME=VALUE flag.
type hostValues struct {
	what string   // "ssh destination", "dir": for the message
	from []string // the values allowed; nil: any
	vals []string
	by   map[string]string
	// peers are the flags of the other transports: a host has one.
	peers []*hostValues
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
	case h.from != nil && !slices.Contains(h.from, v):
		return fmt.Errorf("%s must be one of: %s", h.what, strings.Join(h.from, ", "))
	case !hostName().MatchString(name):
		return fmt.Errorf("host name %q must be letters, digits, '.', '_' or '-'", name)
	case name == tools.HostLocal:
		return errors.New(`"local" is this machine; name the host otherwise`)
	case h.by[name] != "":
		return fmt.Errorf("host %s is given twice", name)
	case h.what == "image" && slices.ContainsFunc(h.peers, func(p *hostValues) bool { return p.what == "container" && p.by[name] != "" }),
		h.what == "container" && slices.ContainsFunc(h.peers, func(p *hostValues) bool { return p.what == "image" && p.by[name] != "" }):
		return fmt.Errorf("host %s names both a running container and an image; a host is one or the other (docs/remote.md)", name)
	case slices.ContainsFunc(h.peers, func(p *hostValues) bool { return p.by[name] != "" }):
		return fmt.Errorf("host %s is given two transports (a host is one of %s)", name, targetKeyNames())
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
	var k hostKey
	if i >= 0 {
		k, ok = hostKeyByName(rest[i+1:])
	}
	if !ok {
		names := make([]string, len(hostKeys))
		for i, k := range hostKeys {
			names[i] = k.key
		}
		return true, &cfgfile.Error{File: e.File, Line: e.Line, Key: e.Key, Err: errors.New("unknown key (a host takes " + strings.Join(names, ", ") + ")")}
	}
	name, flagName := rest[:i], k.flag
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

// remoteHosts builds an executor per configured host, in the order of
// the registry's transports and keys, and of each key's values. They
// connect on first use; what runs there is held to this server's
// timeouts. What an agent says on its standard error (a sandbox the host
// cannot enforce, why it could not start) goes to log, when there is one.
func (c *config) remoteHosts(log *slog.Logger) ([]tools.Host, []hostExecutor, error) {
	for _, hv := range []struct {
		flag string
		v    *hostValues
	}{{"--host-sandbox", &c.hostSandbox}, {"--host-network", &c.hostNetwork}, {"--host-containment", &c.hostContainment}} {
		for name := range hv.v.by {
			if !c.hostConfigured(name) {
				return nil, nil, fmt.Errorf("%s %s: no host %s is configured", hv.flag, name, name)
			}
		}
	}
	byKey := c.transportValues()
	for _, t := range hostTransports {
		if t.check == nil {
			continue
		}
		if err := t.check(byKey); err != nil {
			return nil, nil, err
		}
	}
	for name, cwd := range c.hostCwds.by {
		if !c.hostConfigured(name) {
			return nil, nil, fmt.Errorf("--host-cwd %s: no host %s is configured", name, name)
		}
		if !path.IsAbs(cwd) {
			return nil, nil, fmt.Errorf("--host-cwd %s: %q is not an absolute path", name, cwd)
		}
	}
	var (
		hosts []tools.Host
		exs   []hostExecutor
	)
	for _, th := range c.transportHosts() {
		t, h := th.t, th.h
		o := hostOptions{agentArgs: c.agentArgs(h.name),
			executor: remote.Options{Timeout: c.timeoutMs.millis(), MaxTimeout: c.maxTimeoutMs.millis()}}
		if log != nil {
			name := h.name
			o.stderr = &agentLog{log: log, host: name}
			o.executor.OnConnect = func(hello agent.Hello) {
				log.Info("connected to a remote host", "host", name, "conch", hello.Conch, "enforces", hello.Enforces)
			}
		}
		ex, err := t.new(h, o)
		if err != nil {
			for _, ex := range exs {
				ex.Close()
			}
			return nil, nil, err
		}
		hosts = append(hosts, tools.Host{Name: h.name, Executor: ex, Cwd: h.cwd})
		exs = append(exs, ex)
	}
	return hosts, exs, nil
}

// transportValues are the values of the registered transports' keys.
func (c *config) transportValues() hostsByKey {
	byKey := hostsByKey{}
	for key, v := range c.transportKeys {
		byKey[key] = v.by
	}
	return byKey
}

// configuredHost is a configured host with its transport.
type configuredHost struct {
	t *hostTransport
	h transportHost
}

// transportHosts are the configured hosts, in the order of the
// registry's transports and target keys, and of each key's values (the
// flags' order, else the file's).
func (c *config) transportHosts() []configuredHost {
	var hosts []configuredHost
	for _, t := range hostTransports {
		for _, k := range t.targets {
			for _, v := range c.transportKeys[k.key].vals {
				name, target, _ := strings.Cut(v, "=")
				h := transportHost{name: name, key: k.key, target: target, cwd: c.hostCwds.by[name]}
				for _, x := range t.extras {
					if xv := c.transportKeys[x.key].by[name]; xv != "" {
						if h.extra == nil {
							h.extra = map[string]string{}
						}
						h.extra[x.key] = xv
					}
				}
				hosts = append(hosts, configuredHost{t, h})
			}
		}
	}
	return hosts
}

// hostConfigured reports whether a host called name is configured, by
// any transport.
func (c *config) hostConfigured(name string) bool {
	for _, t := range hostTransports {
		for _, k := range t.targets {
			if c.transportKeys[k.key].by[name] != "" {
				return true
			}
		}
	}
	return false
}

// agentLog writes an agent's standard error to conch's log, a warning
// for each line, naming the host.
type agentLog struct {
	log  *slog.Logger
	host string
	mu   sync.Mutex
	line []byte // the start of a line not yet ended
}

// maxAgentLine cuts a line that never ends.
const maxAgentLine = 4096

func (a *agentLog) Write(p []byte) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.line = append(a.line, p...)
	for {
		i := bytes.IndexByte(a.line, '\n')
		if i < 0 && len(a.line) < maxAgentLine {
			return len(p), nil
		}
		if i < 0 {
			i = len(a.line)
		}
		if line := strings.TrimSpace(string(a.line[:i])); line != "" {
			a.log.Warn("agent on a remote host", "host", a.host, "said", line)
		}
		a.line = a.line[min(i+1, len(a.line)):]
	}
}

// agentArgs are the flags of conch agent on the host called name: the
// caps of this configuration, the host's working directory (the
// sandbox's workspace there), and its containment, sandbox and network:
// the host's own, else this configuration's when given. What is given
// neither way is left to the agent's defaults (docs/remote.md), under
// which a host that cannot enforce them runs its commands with what it
// allows.
func (c *config) agentArgs(name string) []string {
	args := []string{"--timeout-ms", c.timeoutMs.String(), "--max-timeout-ms", c.maxTimeoutMs.String(),
		"--max-output-bytes", c.maxOutputBytes.String(), "--max-spill-bytes", c.maxSpillBytes.String(),
		"--grace-ms", c.graceMs.String()}
	for _, n := range c.passEnv.vals {
		args = append(args, "--pass-env", n)
	}
	if cwd := c.hostCwds.by[name]; cwd != "" {
		args = append(args, "--cwd", cwd)
	}
	for _, f := range []struct {
		flag   string
		host   *hostValues
		global *choice
	}{
		{"--containment", &c.hostContainment, &c.containment},
		{"--sandbox", &c.hostSandbox, &c.sandboxMode},
		{"--network", &c.hostNetwork, &c.network},
	} {
		if v := f.host.by[name]; v != "" {
			args = append(args, f.flag, v)
		} else if f.global.given {
			args = append(args, f.flag, f.global.v)
		}
	}
	return append(args, c.networkArgs()...)
}

// printHosts writes the configured hosts as their table keys, for
// `conch config`.
func (s *settings) printHosts(w io.Writer) {
	for _, k := range hostKeys {
		field, flagName := k.key, k.flag
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
