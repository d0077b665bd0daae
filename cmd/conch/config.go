package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/conch-dev/conch/internal/cachelayer"
	cfgfile "github.com/conch-dev/conch/internal/config"
	"github.com/conch-dev/conch/internal/sandbox"
	"github.com/conch-dev/conch/rules"
	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/shell/local"
	"github.com/conch-dev/conch/tasks"
	"github.com/conch-dev/conch/tools"
)

// config is the executor and tool settings every subcommand shares.
type config struct {
	// warm: the local executor starts each next foreground command's
	// bash ahead (serve, acp and agent, whose sessions run one command
	// after another; not run, which runs one).
	warm            bool
	provider        choice
	logLevel        logLevel
	cwd             string
	timeoutMs       number
	maxTimeoutMs    number
	maxOutputBytes  number
	maxSpillBytes   number
	graceMs         number
	noBackground    bool
	yieldMs         number // 0 turns the yield off
	maxTasks        number
	passEnv         names
	maxResultBytes  number
	hostCwds        hostValues // NAME=DIR
	hostSandbox     hostValues // NAME=MODE
	hostNetwork     hostValues // NAME=on|off
	hostContainment hostValues // NAME=MODE
	// transportKeys are the values of the host transports' keys, by key
	// ("ssh": NAME=SSH; the registry, hosttransports.go).
	transportKeys map[string]*hostValues
	containment   choice
	sandboxMode   choice
	network       choice
	writableRoots paths
	escalation    choice // ask | never (docs/sandbox.md)
	maxPids       number // 0: no limit
	maxMemory     number // 0: no limit
	denyRead      paths
	unixSockets   paths
	ops           opsConfig       // [audit], [telemetry] (ops.go)
	net           networkSettings // --network-allow, -deny, -allow-local, -ask; conch's own listeners

	// configFile, if set before build, is the configuration file read:
	// commands may not write it under a sandbox.
	configFile string

	// maxWait, if set before build, caps task_output's wait
	// (tools.Options.MaxWait).
	maxWait time.Duration

	// rules, if set before build, decide every bash command
	// (tools.Options.Rules).
	rules *rules.Rules

	// firstOwner, if set before build, is the owner of the first
	// command (conch run's session): the contained provider keeps the
	// init it starts at build for it (contained.Options.FirstOwner).
	firstOwner string

	// spareInits, if set before build, has the contained provider keep
	// an init started ahead for the next session (a server's:
	// contained.Options.Spare).
	spareInits bool

	// onNotice, if set before build, is told when a completion notice
	// becomes pending for a session (tasks.Options.OnNotice).
	onNotice func(owner string)
}

// The values of --containment, --sandbox and --network.
var (
	containmentModes = []string{"auto", "require", "off"}
	sandboxModes     = []string{string(sandbox.ReadOnly), string(sandbox.WorkspaceWrite), string(sandbox.FullAccess)}
	networkModes     = []string{string(sandbox.NetworkOn), string(sandbox.NetworkPublic), string(sandbox.NetworkAllowlist), string(sandbox.NetworkOff)}
)

// number is a flag value that must be a positive finite number (or, with
// zeroOK, zero) that conch can honour as given: a count is a whole number
// that fits an int; a number of milliseconds fits a time.Duration and is
// at least a nanosecond. (Anything else would be silently replaced by a
// default, or refused later under the name of an internal field.)
type number struct {
	v      float64
	zeroOK bool
	count  bool    // a whole number of things, not milliseconds
	least  float64 // when set, the smallest value conch honours
}

// maxCount is the largest count a float64 holds exactly (and an int on
// every platform conch runs on).
const maxCount = 1 << 53

func (n *number) String() string {
	if n == nil {
		return ""
	}
	return strconv.FormatFloat(n.v, 'f', -1, 64)
}

func (n *number) Set(s string) error {
	f, err := strconv.ParseFloat(s, 64)
	switch {
	case err != nil, math.IsNaN(f), math.IsInf(f, 0), f < 0, f == 0 && !n.zeroOK:
		if n.zeroOK {
			return errors.New("must be zero or a positive finite number")
		}
		return errors.New("must be a positive finite number")
	case n.count && f != math.Trunc(f):
		return errors.New("must be a whole number")
	case f < n.least:
		return fmt.Errorf("must be at least %v", n.least)
	case n.count && f > maxCount:
		return fmt.Errorf("must be at most %d", int64(maxCount))
	case !n.count && f*float64(time.Millisecond) >= math.MaxInt64:
		return fmt.Errorf("must be at most %d", int64(math.MaxInt64/time.Millisecond))
	case !n.count && f > 0 && f*float64(time.Millisecond) < 1:
		return errors.New("must be at least 0.000001 (one nanosecond)")
	}
	n.v = f
	return nil
}

func (n number) millis() time.Duration { return time.Duration(n.v * float64(time.Millisecond)) }

// names is a flag value that may be given many times, each time one
// variable name. Its configuration key takes a list.
type names struct{ vals []string }

func (n *names) String() string {
	if n == nil {
		return ""
	}
	return strings.Join(n.vals, ",")
}

func (n *names) Set(s string) error {
	if s == "" || strings.ContainsAny(s, "=\x00") {
		return errors.New("must be a variable name")
	}
	n.vals = append(n.vals, s)
	return nil
}

func (n *names) isList()          {}
func (n *names) Values() []string { return n.vals }

// paths is a flag value that may be given many times, each time one
// path. Its configuration key takes a list.
type paths struct{ vals []string }

func (p *paths) String() string {
	if p == nil {
		return ""
	}
	return strings.Join(p.vals, ",")
}

func (p *paths) Set(s string) error {
	if s == "" || strings.ContainsRune(s, 0) {
		return errors.New("must be a path")
	}
	p.vals = append(p.vals, s)
	return nil
}

func (p *paths) isList()          {}
func (p *paths) Values() []string { return p.vals }

// addFlags registers the shared flags with their defaults; yieldDefault
// is the yield window of this subcommand in ms, logDefault its log level.
func (c *config) addFlags(fs *flag.FlagSet, yieldDefault float64, logDefault slog.Level) {
	c.provider = choice{v: "auto", from: providers}
	c.logLevel = logLevel{logDefault}
	c.yieldMs = number{v: yieldDefault, zeroOK: true}
	c.maxTasks = number{v: tasks.DefaultMaxPerSession, count: true}
	c.maxResultBytes = number{v: tools.DefaultMaxResultBytes, count: true, least: tools.MinResultBytes}
	fs.Var(&c.provider, "provider", "the executor that runs commands: auto (contained where the host allows an init, else local, as --containment says), local (no init: --containment off) or contained (an init per session: --containment require)")
	fs.Var(&c.logLevel, "log-level", "least level of the log lines on stderr (debug, info, warn, error)")
	c.addExecutorFlags(fs)
	fs.BoolVar(&c.noBackground, "no-background", false, "disable run_in_background")
	fs.Var(&c.yieldMs, "yield-ms", "move a foreground call still running after this many ms to a background task (0: off; off with --no-background)")
	fs.Var(&c.maxTasks, "max-tasks", "running background tasks per session")
	c.addHostFlags(fs)
	c.escalation = choice{v: "ask", from: []string{"ask", "never"}}
	fs.Var(&c.escalation, "sandbox-escalation", "when the sandbox denied a command: ask (the user, where the client can ask, whether to run it again outside the sandbox, once) or never")
	fs.Var(&c.maxResultBytes, "max-result-bytes", "bound on the text of a bash result (longer output keeps its start and end), in bytes")
	c.ops.addFlags(fs)
}

// addExecutorFlags registers the flags of the executor with their
// defaults: the ones conch agent takes too.
func (c *config) addExecutorFlags(fs *flag.FlagSet) {
	c.timeoutMs = number{v: float64(local.DefaultTimeout.Milliseconds())}
	c.maxTimeoutMs = number{v: float64(local.DefaultMaxTimeout.Milliseconds())}
	c.maxOutputBytes = number{v: local.DefaultMaxOutputBytes, count: true}
	c.maxSpillBytes = number{v: local.DefaultMaxSpillBytes, count: true}
	c.graceMs = number{v: float64(local.DefaultGrace.Milliseconds())}
	fs.StringVar(&c.cwd, "cwd", "", "default working directory of commands (default: the current directory)")
	fs.Var(&c.timeoutMs, "timeout-ms", "default foreground timeout in ms")
	fs.Var(&c.maxTimeoutMs, "max-timeout-ms", "cap on any foreground timeout in ms")
	fs.Var(&c.maxOutputBytes, "max-output-bytes", "tail kept in memory per stream, in bytes")
	fs.Var(&c.maxSpillBytes, "max-spill-bytes", "cap on each stream's spill file, in bytes")
	fs.Var(&c.graceMs, "grace-ms", "delay between SIGTERM and SIGKILL, in ms")
	fs.Var(&c.passEnv, "pass-env", "let commands inherit the variable `NAME` although it looks like a secret (repeatable)")
	c.containment = choice{v: "auto", from: containmentModes}
	c.sandboxMode = choice{v: string(sandbox.WorkspaceWrite), from: sandboxModes}
	c.network = choice{v: string(sandbox.NetworkPublic), from: networkModes}
	fs.Var(&c.containment, "containment", "run commands in their own user, PID and mount namespaces: auto (where the host allows them), require (refuse to start without), or off (no init; the default sandbox is then off too)")
	fs.Var(&c.sandboxMode, "sandbox", "where commands may write: read-only, workspace-write (--cwd, the temp dirs, the cache dir, --writable-root) or full-access; the default workspace-write runs without a file sandbox where the host cannot enforce it, a mode given explicitly refuses to start there")
	fs.Var(&c.network, "network", "how commands reach the network: public (every destination but the host's own addresses, its loopback, private and link-local ranges and the cloud metadata address), allowlist (only --network-allow), off (nothing), or on (the host's network as it is, no policy); public and allowlist need a TUN device, and the default public runs as on where the host cannot give one, a mode given explicitly refuses to start there (default public; on under --sandbox full-access)")
	c.addNetworkFlags(fs)
	fs.Var(&c.writableRoots, "writable-root", "one more `DIR` commands may write under --sandbox workspace-write (repeatable)")
	c.maxPids = number{zeroOK: true, count: true}
	c.maxMemory = number{zeroOK: true, count: true}
	fs.Var(&c.maxPids, "max-pids", "at most `N` processes and threads per command, all it starts included (0: no limit); needs containment and the pids controller: starts it under --containment auto, refused with off")
	fs.Var(&c.maxMemory, "max-memory", "at most `BYTES` of memory per command, all it starts included, past which the kernel kills one of its processes (0: no limit); needs containment and the memory controller: starts it under --containment auto, refused with off")
	fs.Var(&c.denyRead, "deny-read", "a `PATH` commands may neither read nor write under --sandbox read-only or workspace-write: a directory lists empty, a file reads empty (repeatable)")
	fs.Var(&c.unixSockets, "unix-socket", "a unix socket `PATH` commands may connect to under --sandbox read-only or workspace-write, which refuse every other but the sockets the session's commands bind themselves (repeatable; --pass-env SSH_AUTH_SOCK lists the agent's)")
}

// stateDir is conch's state directory (tools.StateDir).
func stateDir() string { return tools.StateDir() }

// cacheLayerDir is where conch's cache layer lives: in its state
// directory, which commands cannot see, and from which the user's own
// tools never run anything (docs/sandbox.md#the-cache-layer).
func cacheLayerDir() string { return filepath.Join(stateDir(), "cache-layer") }

// stack is what a subcommand runs: the executor, the task runtime and the
// tools over them. close releases them in order.
type stack struct {
	ex shell.Executor
	// unsandboxed runs the commands a user let out of the sandbox; nil
	// without a sandbox or with escalation never.
	unsandboxed shell.Executor
	hosts       []hostExecutor
	tasks       *tasks.Runtime
	tools       *tools.Toolset
	home        string
	// ops records the stack's work (audit log, traces, metrics).
	ops *operations

	provider string // the provider built: local or contained
	enforces string // what the provider enforces, for the start-up line
}

// build creates the stack. With a logger it logs the names (never the
// values) of the variables commands do not inherit, so that the user can
// see what was withheld and pass one through with --pass-env.
func (c *config) build(log *slog.Logger) (*stack, error) {
	if err := c.checkCwd(); err != nil {
		return nil, err
	}
	lo, late := c.localOptions(), &lateRecorder{}
	lo.Recorder = late // the inits' starts, once the operations are built
	ex, enforces, err := c.executor(lo, log)
	if err != nil {
		return nil, err
	}
	if scrubbed := enforces.scrubbed; log != nil && len(scrubbed) > 0 {
		log.Info("commands do not inherit these variables (--pass-env NAME passes one)", "names", strings.Join(scrubbed, ","))
	}
	hosts, hostExs, err := c.remoteHosts(log)
	if err != nil {
		ex.Close()
		return nil, err
	}
	if log != nil && len(hosts) > 0 {
		names := make([]string, len(hosts))
		for i, h := range hosts {
			names[i] = h.Name
		}
		log.Info("remote hosts (conch agent runs there over SSH or a container engine's exec)", "names", strings.Join(names, ","))
	}
	home := stateDir()
	rt := tasks.New(&tasks.Options{MaxPerSession: int(c.maxTasks.v), OnNotice: c.onNotice})
	op, err := c.ops.build(log, rt)
	if err != nil {
		(&stack{ex: ex, unsandboxed: enforces.unsandboxed, hosts: hostExs, tasks: rt, ops: &operations{}}).close()
		return nil, err
	}
	late.set(op.recorder)
	ts := tools.New(ex, &tools.Options{
		Tasks:             rt,
		DisableBackground: c.noBackground,
		Home:              home,
		YieldAfter:        c.yieldMs.millis(),
		MaxWait:           c.maxWait,
		MaxResultBytes:    int(c.maxResultBytes.v),
		Rules:             c.rules,
		Projects:          cfgfile.NewProjects(enforces.project.Mode, enforces.project.Network, enforces.project.Unavailable),
		Hosts:             hosts,
		BashNotes:         enforces.bashNotes(),
		Scrubbed:          enforces.scrubbed,
		Unsandboxed:       enforces.unsandboxed,
		Sandbox:           enforces.project,
		Recorder:          op.recorder,
	})
	return &stack{ex: ex, unsandboxed: enforces.unsandboxed, hosts: hostExs, tasks: rt, tools: ts, home: home, ops: op, provider: enforces.provider, enforces: enforces.String()}, nil
}

// checkCwd refuses a --cwd that is not a directory.
func (c *config) checkCwd() error {
	if c.cwd == "" {
		return nil
	}
	if fi, err := os.Stat(c.cwd); err != nil || !fi.IsDir() {
		return fmt.Errorf("--cwd %s: not a directory", c.cwd)
	}
	return nil
}

// localOptions are the local executor's options the flags set.
func (c *config) localOptions() *local.Options {
	return &local.Options{
		Cwd:            c.cwd,
		Timeout:        c.timeoutMs.millis(),
		MaxTimeout:     c.maxTimeoutMs.millis(),
		MaxOutputBytes: int(c.maxOutputBytes.v),
		MaxSpillBytes:  int64(c.maxSpillBytes.v),
		Grace:          c.graceMs.millis(),
		PassEnv:        c.passEnv.vals,
		Warm:           c.warm,
	}
}

// localEnforces is what the local provider holds every command to, with
// or without containment.
const localEnforces = "process groups, child subreaper, environment scrub, non-dumpable server"

// enforcement is what the executor holds commands to beyond
// localEnforces: its containment ("pid-namespace, cgroup", or
// "none (<cause>)") and its sandbox ("workspace-write, network off", or
// "none (off)").
type enforcement struct {
	// provider is the provider built: "local" or "contained" (the
	// start-up line, conch doctor).
	provider             string
	containment, sandbox string
	// cacheLayer is conch doctor's cache layer line
	// (docs/sandbox.md#the-cache-layer).
	cacheLayer string
	// degraded: the default sandbox runs without its file sandbox, which
	// this host cannot enforce; the bash description says so
	// (sandbox.DegradedNote, docs/sandbox.md).
	degraded bool
	// unsandboxed, with a sandbox and escalation ask, is the executor of
	// the commands a user lets out of it (tools.Options.Unsandboxed).
	unsandboxed shell.Executor
	// project is the sandbox a project file may narrow
	// (tools.Options.Sandbox): the one the commands run in, or why they
	// have none a project could narrow.
	project tools.Sandbox
	// network is conch doctor's network line (after "network: "), netNote
	// the bash description's sentence about the network ("" for none).
	network, netNote string
	// scrubbed are the names of the variables commands do not inherit
	// (local.Executor.Scrubbed), cwd the commands' default directory.
	scrubbed []string
	cwd      string
}

// localProvider is the local provider of o, which enforces what
// localEnforces says and enf adds.
func localProvider(o *local.Options, enf enforcement) (shell.Executor, enforcement, error) {
	ex, err := local.New(o)
	if err != nil {
		return nil, enf, err
	}
	enf.provider, enf.scrubbed, enf.cwd = "local", ex.Scrubbed(), ex.Options().Cwd
	return ex, enf, nil
}

// noSandbox is the tools.Sandbox of commands that run without a sandbox
// a project could narrow, for cause.
func noSandbox(cause string) tools.Sandbox {
	return tools.Sandbox{Unavailable: "the session's commands run without a sandbox (" + cause + ")"}
}

// bashNotes are the sentences the bash description ends with for e.
func (e enforcement) bashNotes() []string {
	var notes []string
	if e.netNote != "" {
		notes = append(notes, e.netNote)
	}
	if e.degraded {
		notes = append(notes, sandbox.DegradedNote)
	}
	return notes
}

func (e enforcement) String() string {
	return localEnforces + "; containment: " + e.containment + "; sandbox: " + e.sandbox
}

// sandboxGiven reports whether the user chose a restriction (by a flag
// or a configuration key): a mode other than full-access, or the network
// off. It must hold, where the default degrades to what the host allows.
func (c *config) sandboxGiven() bool {
	return (c.sandboxMode.given && c.sandboxMode.v != string(sandbox.FullAccess)) ||
		(c.network.given && c.network.v != string(sandbox.NetworkOn))
}

// sandboxPolicy is the sandbox the flags configure, and whether it
// restricts anything: full-access with the network on needs no init.
func (c *config) sandboxPolicy() (p sandbox.Policy, restricts bool, err error) {
	ws := c.cwd
	if ws == "" {
		if ws, err = os.Getwd(); err != nil {
			return p, false, fmt.Errorf("sandbox: workspace: %w", err)
		}
	}
	cfgFile := c.configFile
	if cfgFile == "" {
		cfgFile = cfgfile.DefaultPath()
	}
	p = sandbox.Policy{
		Mode:          sandbox.Mode(c.sandboxMode.v),
		Network:       c.networkMode(),
		Workspace:     ws,
		WritableRoots: c.writableRoots.vals,
		DenyRead:      c.denyRead.vals,
		UnixSockets:   c.allowedSockets(),
		TempDirs:      []string{os.TempDir(), "/tmp"},
		// conch's own files, the HTTP token and the cache layer among
		// them: out of the commands' sight (CONTRACT 16.1).
		Hidden: append([]string{cfgFile, filepath.Dir(cfgfile.DefaultPath()), stateDir(), filepath.Dir(tokenPath())},
			c.ops.hidden(ws)...),
		// In the state directory, which commands cannot see.
		SearchCache: filepath.Join(stateDir(), "repo-search"),
	}
	if p.Mode == sandbox.WorkspaceWrite || p.Mode == "" {
		// The caches: read from the user's, written to conch's layer
		// (docs/sandbox.md#the-cache-layer); a missing one is made first,
		// where its tool is installed, so that the layer has a mount
		// point.
		p.Caches = cachelayer.Ensure(cachelayer.Dirs(os.Getenv), nil)
		p.CacheLayer = cacheLayerDir()
	}
	p.Net = c.netPolicy(p.Network)
	return p, p.Mode != sandbox.FullAccess || p.Network != sandbox.NetworkOn, nil
}

// allowedSockets are the unix sockets the sandbox lets commands connect
// to: --unix-socket's, and the SSH agent's when the user passes
// SSH_AUTH_SOCK through (--pass-env), which would be of no use without
// its socket (docs/sandbox.md#unix-sockets).
func (c *config) allowedSockets() []string {
	socks := slices.Clone(c.unixSockets.vals)
	if slices.Contains(c.passEnv.vals, "SSH_AUTH_SOCK") {
		if v := os.Getenv("SSH_AUTH_SOCK"); v != "" {
			socks = append(socks, v)
		}
	}
	return socks
}

// close kills every task and every process, and removes the spill files;
// the agents on remote hosts do the same there.
func (s *stack) close() error {
	if s.tools != nil {
		s.tools.Shutdown()
	}
	s.tasks.Close()
	for _, h := range s.hosts {
		h.Close()
	}
	if s.unsandboxed != nil {
		s.unsandboxed.Close()
	}
	err := s.ex.Close()
	s.ops.close(nil)
	return err
}
