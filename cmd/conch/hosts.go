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
	"github.com/conch-dev/conch/shell/remote/container"
	"github.com/conch-dev/conch/shell/remote/sshhost"
	"github.com/conch-dev/conch/tools"
)

// Remote hosts are configured as tables, `[hosts.<name>]` with one
// transport (`ssh`, or `podman` or `docker`: a running container, or
// `image` with `engine`: a template, a container of that image for each
// session), and `cwd`, `sandbox`, `network` and `containment`, or with
// the repeatable flags --host NAME=SSH, --host-podman NAME=CONTAINER,
// --host-docker NAME=CONTAINER, --host-image NAME=IMAGE, --host-engine
// NAME=ENGINE, --host-cwd NAME=DIR, --host-sandbox NAME=MODE,
// --host-network NAME=on|off and --host-containment NAME=MODE; a flag
// replaces the file's hosts of its transport (docs/remote.md).

// hostFields maps a host table's keys to their flags.
var hostFields = map[string]string{"ssh": "host", "podman": "host-podman", "docker": "host-docker", "image": "host-image",
	"engine": "host-engine", "cwd": "host-cwd", "sandbox": "host-sandbox", "network": "host-network", "containment": "host-containment"}

// hostFieldNames are the keys of a host table, in the order conch config
// prints them.
var hostFieldNames = []string{"ssh", "podman", "docker", "image", "engine", "cwd", "sandbox", "network", "containment"}

// hostExecutor is a configured host's executor: a remote.Executor, or a
// container.Template that holds one per session.
type hostExecutor interface {
	shell.Executor
	Hello(context.Context) (agent.Hello, error)
}

// addHostFlags registers the flags of remote hosts.
func (c *config) addHostFlags(fs *flag.FlagSet) {
	c.hosts = hostValues{what: "ssh destination"}
	c.hostCwds = hostValues{what: "dir"}
	c.hostSandbox = hostValues{what: "mode", from: sandboxModes}
	c.hostNetwork = hostValues{what: "network", from: networkModes}
	c.hostContainment = hostValues{what: "mode", from: containmentModes}
	c.hostPodman = hostValues{what: "container"}
	c.hostDocker = hostValues{what: "container"}
	c.hostImage = hostValues{what: "image"}
	c.hostEngine = hostValues{what: "engine", from: container.Engines}
	c.hosts.peers = []*hostValues{&c.hostPodman, &c.hostDocker, &c.hostImage}
	c.hostPodman.peers = []*hostValues{&c.hosts, &c.hostDocker, &c.hostImage}
	c.hostDocker.peers = []*hostValues{&c.hosts, &c.hostPodman, &c.hostImage}
	c.hostImage.peers = []*hostValues{&c.hosts, &c.hostPodman, &c.hostDocker}
	fs.Var(&c.hosts, "host", "a remote host commands may run on, `NAME=SSH` (user@host:port or a ~/.ssh/config alias; repeatable)")
	fs.Var(&c.hostPodman, "host-podman", "a running podman container commands may run on, `NAME=CONTAINER` (through podman exec; repeatable)")
	fs.Var(&c.hostDocker, "host-docker", "a running docker container commands may run on, `NAME=CONTAINER` (through docker exec; repeatable)")
	fs.Var(&c.hostImage, "host-image", "a template host, `NAME=IMAGE`: each session's commands run in a container of IMAGE, started by its first command and removed at its end (with --host-engine; repeatable)")
	fs.Var(&c.hostEngine, "host-engine", "the engine of a template host (--host-image), `NAME=ENGINE`: podman or docker (repeatable)")
	fs.Var(&c.hostCwds, "host-cwd", "default working directory on a remote host, `NAME=DIR` (default: the remote user's home, or the container user's; repeatable)")
	fs.Var(&c.hostSandbox, "host-sandbox", "the sandbox of a remote host, `NAME=MODE` (default: --sandbox when given, else workspace-write with the host's working directory as the workspace; repeatable)")
	fs.Var(&c.hostNetwork, "host-network", "how commands on a remote host reach the network, `NAME=MODE` with a mode of --network (default: --network when given, else the agent's default, public, degraded to on where that host cannot enforce it; repeatable)")
	fs.Var(&c.hostContainment, "host-containment", "the containment of a remote host, `NAME=MODE` (default: --containment when given, else auto; repeatable)")
	c.addKubeFlags(fs)
}

// hostName is what a host may be called: the model sees it, in the bash
// tool's host enum and in task kinds (bash@<name>).
var hostName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

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
	case !hostName.MatchString(name):
		return fmt.Errorf("host name %q must be letters, digits, '.', '_' or '-'", name)
	case name == tools.HostLocal:
		return errors.New(`"local" is this machine; name the host otherwise`)
	case h.by[name] != "":
		return fmt.Errorf("host %s is given twice", name)
	case h.what == "image" && slices.ContainsFunc(h.peers, func(p *hostValues) bool { return p.what == "container" && p.by[name] != "" }),
		h.what == "container" && slices.ContainsFunc(h.peers, func(p *hostValues) bool { return p.what == "image" && p.by[name] != "" }):
		return fmt.Errorf("host %s names both a running container and an image; a host is one or the other (docs/remote.md)", name)
	case slices.ContainsFunc(h.peers, func(p *hostValues) bool { return p.by[name] != "" }):
		return fmt.Errorf("host %s is given two transports (a host is one of ssh, podman, docker, image, kubernetes or pod_template)", name)
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
		return true, &cfgfile.Error{File: e.File, Line: e.Line, Key: e.Key, Err: errors.New("unknown key (a host takes " + strings.Join(hostFieldNames, ", ") + ")")}
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
// first use; what runs there is held to this server's timeouts. What an
// agent says on its standard error (a sandbox the host cannot enforce,
// why it could not start) goes to log, when there is one.
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
	for name := range c.hostEngine.by {
		if c.hostImage.by[name] == "" {
			return nil, nil, fmt.Errorf("--host-engine %s: the engine is that of a host made from an image, and host %s has no image", name, name)
		}
	}
	for name := range c.hostImage.by {
		if c.hostEngine.by[name] == "" {
			return nil, nil, fmt.Errorf("host %s: an image needs its engine: engine = \"%s\" (--host-engine %s=ENGINE)", name, strings.Join(container.Engines, `" or "`), name)
		}
	}
	if err := c.checkKubeContexts(); err != nil {
		return nil, nil, err
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
	for _, spec := range c.hostSpecs() {
		name, target, _ := strings.Cut(spec.v, "=")
		var stderr io.Writer
		eo := remote.Options{Timeout: c.timeoutMs.millis(), MaxTimeout: c.maxTimeoutMs.millis()}
		if log != nil {
			stderr = &agentLog{log: log, host: name}
			eo.OnConnect = func(h agent.Hello) {
				log.Info("connected to a remote host", "host", name, "conch", h.Conch, "enforces", h.Enforces)
			}
		}
		var (
			ex  hostExecutor
			err error
		)
		co := &container.Options{AgentArgs: c.agentArgs(name), Stderr: stderr, Executor: eo}
		switch {
		case spec.image:
			ex, err = container.NewTemplate(container.Host{Name: name, Engine: spec.engine, Image: target, Cwd: c.hostCwds.by[name]}, co)
		case spec.engine == "kubernetes" || spec.engine == "pod_template":
			ex, err = c.kubeExecutor(name, spec.engine, target, stderr, eo)
		case spec.engine == "":
			ex, err = sshhost.New(sshhost.Host{Name: name, SSH: target, Cwd: c.hostCwds.by[name]},
				&sshhost.Options{AgentArgs: c.agentArgs(name), Stderr: stderr, Executor: eo})
		default:
			ex, err = container.New(container.Host{Name: name, Engine: spec.engine, Container: target, Cwd: c.hostCwds.by[name]}, co)
		}
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

// hostSpec is a configured host: NAME=TARGET of its transport's flag,
// its engine ("" for SSH), and whether TARGET is an image.
type hostSpec struct {
	v, engine string
	image     bool
}

// hostSpecs are the configured hosts: those over SSH, then the podman
// and the docker containers, then the templates.
func (c *config) hostSpecs() []hostSpec {
	var specs []hostSpec
	for _, t := range []struct {
		v      *hostValues
		engine string
	}{{&c.hosts, ""}, {&c.hostPodman, "podman"}, {&c.hostDocker, "docker"}, {&c.kube.target, "kubernetes"}, {&c.kube.template, "pod_template"}} {
		for _, v := range t.v.vals {
			specs = append(specs, hostSpec{v: v, engine: t.engine})
		}
	}
	for _, v := range c.hostImage.vals {
		name, _, _ := strings.Cut(v, "=")
		specs = append(specs, hostSpec{v: v, engine: c.hostEngine.by[name], image: true})
	}
	return specs
}

// hostConfigured reports whether a host called name is configured, by
// any transport.
func (c *config) hostConfigured(name string) bool {
	return c.hosts.by[name] != "" || c.hostPodman.by[name] != "" || c.hostDocker.by[name] != "" || c.hostImage.by[name] != "" ||
		c.kube.target.by[name] != "" || c.kube.template.by[name] != ""
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
	for _, field := range hostFieldNames {
		flagName := hostFields[field]
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
