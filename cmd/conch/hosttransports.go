package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/conch-dev/conch/shell/remote"
	"github.com/conch-dev/conch/shell/remote/container"
	"github.com/conch-dev/conch/shell/remote/sshhost"
)

// The host transports: the ways conch reaches conch agent on a remote
// host (docs/remote.md). Each is one record of the registry below: the
// keys of a host table that name a host of it, with their flags, the
// keys only its hosts take, conch doctor's words for such a host, and
// the constructor of its executor from the host's settings. Flags, the
// configuration file, conch config, conch doctor --host and the build
// of the stack (hosts.go) read the registry; none names a transport. A
// new transport is a package under shell/remote (which knows nothing of
// flags) and one registerHostTransport call in a file of its own here, as
// the Kubernetes one makes (hostkube_kube.go;
// docs/architecture.md#adding-a-provider).

// hostKey is a key of a host table, `[hosts.<name>] <key> = "VALUE"`,
// and its repeatable flag, `--<flag> NAME=VALUE`.
type hostKey struct {
	key, flag string
	// what names the value in messages and in the flag's NAME=VALUE
	// form ("ssh destination": "must be NAME=SSH_DESTINATION").
	what string
	// from are the values allowed; nil allows any.
	from  []string
	usage string
}

// hostTransport is a registered host transport.
type hostTransport struct {
	// targets are the keys that name a host of this transport and its
	// target, one per kind of target (podman, docker). A host has
	// exactly one target key, among those of every transport.
	targets []hostKey
	// extras are the keys only this transport's hosts take (a
	// template's engine).
	extras []hostKey
	// check refuses, before any host is built, what the configured keys
	// cannot mean for this transport (an extra key given for a host that
	// is not one of its own, a key its hosts need that is missing). nil:
	// nothing to check.
	check func(hosts hostsByKey) error
	// describe is conch doctor --host's words for host h, after the
	// host's name ("podman container devbox").
	describe func(h transportHost) string
	// new builds the executor of host h; it connects on first use.
	new func(h transportHost, o hostOptions) (hostExecutor, error)
}

// hostsByKey are the configured hosts' values: by key, then by host name.
type hostsByKey map[string]map[string]string

// transportHost is a configured host as its transport sees it.
type transportHost struct {
	name string
	// key is its target key ("podman"), target that key's value.
	key, target string
	// cwd is the host's working directory ("": the remote user's home).
	cwd string
	// extra are the transport's extra keys given for the host, by key.
	extra map[string]string
}

// hostOptions are what conch gives every host's executor: the flags of
// conch agent there, where the agent's standard error goes (nil:
// nowhere), and the executor's timeouts and connection hook.
type hostOptions struct {
	agentArgs []string
	stderr    io.Writer
	executor  remote.Options
}

// hostSettingKeys are the keys every host takes, whatever its transport
// (their flags: addHostFlags).
var hostSettingKeys = []hostKey{
	{key: "cwd", flag: "host-cwd"},
	{key: "sandbox", flag: "host-sandbox"},
	{key: "network", flag: "host-network"},
	{key: "containment", flag: "host-containment"},
}

var (
	// hostTransports are the registered transports, in the order of
	// registration, which is the order hosts are built in (and so the
	// order of the bash tool's host enum): those of this file, as the
	// package's variables are initialised, then the ones the init
	// functions of other files register.
	hostTransports = []*hostTransport{&sshTransport, &containerTransport, &templateTransport}

	// hostKeys are every key of a host table, in the order conch config
	// prints them and the messages list them: this file's transports'
	// keys, the keys every host takes, then the keys of the transports
	// registered later (where they were when the first of those came).
	hostKeys = append(keysOf(hostTransports), hostSettingKeys...)
)

// registerHostTransport adds t to the registry. It is called from an init
// function, once per transport.
func registerHostTransport(t *hostTransport) {
	hostTransports = append(hostTransports, t)
	hostKeys = append(hostKeys, keysOf([]*hostTransport{t})...)
}

// keysOf are the target and extra keys of ts, in order.
func keysOf(ts []*hostTransport) []hostKey {
	var keys []hostKey
	for _, t := range ts {
		keys = append(append(keys, t.targets...), t.extras...)
	}
	return keys
}

// hostKeyByName is the host key called key, if there is one.
func hostKeyByName(key string) (hostKey, bool) {
	for _, k := range hostKeys {
		if k.key == key {
			return k, true
		}
	}
	return hostKey{}, false
}

// isHostFlag reports whether name is the flag of a host key: such flags
// are set by host tables, not by top-level keys.
func isHostFlag(name string) bool {
	for _, k := range hostKeys {
		if k.flag == name {
			return true
		}
	}
	return false
}

// targetKeyNames lists every transport's target keys for a message: "ssh,
// podman, …, kubernetes or pod_template".
func targetKeyNames() string {
	var names []string
	for _, t := range hostTransports {
		for _, k := range t.targets {
			names = append(names, k.key)
		}
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// sshTransport: `ssh = "user@host:port"` (or a ~/.ssh/config alias), a
// host reached over SSH (shell/remote/sshhost).
var sshTransport = hostTransport{
	targets: []hostKey{{key: "ssh", flag: "host", what: "ssh destination",
		usage: "a remote host commands may run on, `NAME=SSH` (user@host:port or a ~/.ssh/config alias; repeatable)"}},
	describe: func(h transportHost) string { return "ssh " + h.target },
	new: func(h transportHost, o hostOptions) (hostExecutor, error) {
		return asHost(sshhost.New(sshhost.Host{Name: h.name, SSH: h.target, Cwd: h.cwd},
			&sshhost.Options{AgentArgs: o.agentArgs, Stderr: o.stderr, Executor: o.executor}))
	},
}

// containerTransport: `podman = "CONTAINER"` or `docker = "CONTAINER"`,
// a running container reached through its engine's exec
// (shell/remote/container).
var containerTransport = hostTransport{
	targets: []hostKey{
		{key: "podman", flag: "host-podman", what: "container",
			usage: "a running podman container commands may run on, `NAME=CONTAINER` (through podman exec; repeatable)"},
		{key: "docker", flag: "host-docker", what: "container",
			usage: "a running docker container commands may run on, `NAME=CONTAINER` (through docker exec; repeatable)"},
	},
	describe: func(h transportHost) string { return h.key + " container " + h.target },
	new: func(h transportHost, o hostOptions) (hostExecutor, error) {
		return asHost(container.New(container.Host{Name: h.name, Engine: h.key, Container: h.target, Cwd: h.cwd},
			&container.Options{AgentArgs: o.agentArgs, Stderr: o.stderr, Executor: o.executor}))
	},
}

// templateTransport: `image = "IMAGE"` with `engine = "podman"` (or
// "docker"), a template: a container of that image for each session,
// started by its first command and removed at its end
// (container.Template).
var templateTransport = hostTransport{
	targets: []hostKey{{key: "image", flag: "host-image", what: "image",
		usage: "a template host, `NAME=IMAGE`: each session's commands run in a container of IMAGE, started by its first command and removed at its end (with --host-engine; repeatable)"}},
	extras: []hostKey{{key: "engine", flag: "host-engine", what: "engine", from: container.Engines,
		usage: "the engine of a template host (--host-image), `NAME=ENGINE`: podman or docker (repeatable)"}},
	check: func(hosts hostsByKey) error {
		for name := range hosts["engine"] {
			if hosts["image"][name] == "" {
				return fmt.Errorf("--host-engine %s: the engine is that of a host made from an image, and host %s has no image", name, name)
			}
		}
		for name := range hosts["image"] {
			if hosts["engine"][name] == "" {
				return fmt.Errorf("host %s: an image needs its engine: engine = \"%s\" (--host-engine %s=ENGINE)", name, strings.Join(container.Engines, `" or "`), name)
			}
		}
		return nil
	},
	describe: func(h transportHost) string { return h.extra["engine"] + " container of image " + h.target },
	new: func(h transportHost, o hostOptions) (hostExecutor, error) {
		return asHost(container.NewTemplate(container.Host{Name: h.name, Engine: h.extra["engine"], Image: h.target, Cwd: h.cwd},
			&container.Options{AgentArgs: o.agentArgs, Stderr: o.stderr, Executor: o.executor}))
	},
}

// asHost is a transport package's constructor's result as a host's: no
// executor (not a typed nil) when it failed.
func asHost[E hostExecutor](ex E, err error) (hostExecutor, error) {
	if err != nil {
		return nil, err
	}
	return ex, nil
}
