package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// Report is the structured `sandbox` value of a result: the session's
// mode and network, and what the sandbox denied this command.
type Report struct {
	Mode    Mode     `json:"mode"`
	Network Network  `json:"network"`
	Denied  []Denial `json:"denied"`
}

// Denial is one operation the sandbox denied: Op is "write" (Path named)
// or "network" (no path).
type Denial struct {
	Path string `json:"path,omitempty"`
	Op   string `json:"op"`
}

// Host answers what attribution must ask the machine, on the server's
// side, outside the sandbox.
type Host interface {
	// CanWrite reports whether the server itself could write path:
	// unix.Access(W_OK) on it, or on its nearest existing ancestor when
	// it does not exist.
	CanWrite(path string) bool
	// Resolve returns path with the symlinks of its existing prefix
	// resolved (where a write to it would land).
	Resolve(path string) string
}

// Failure is a finished command as attribution sees it.
type Failure struct {
	Stderr   string
	ExitCode int
	Workdir  string // where the command ran: relative paths are resolved against it
	// Command is the command line; with the network off, a failed
	// resolver (getent, host, dig, nslookup) says nothing on stderr.
	Command string
}

// DegradedNote is the sentence the bash tool's description gains when the
// default mode runs without a file sandbox because the host cannot
// enforce it.
const DegradedNote = "Commands run without a file sandbox on this host."

// UnenforcedFiles begins what Restrict reports when the host has no file
// sandbox (no Landlock): the case DegradedNote is for.
const UnenforcedFiles = "file sandbox"

// maxNamed bounds the paths one result names.
const maxNamed = 5

// Markers returned by Attribute, each a line of its own in the result.
const (
	markerWrite     = "[sandbox: write to %s denied under %s mode; writable: %s]"
	markerProtected = "[sandbox: %s is read-only (protected)]"
	markerNetwork   = "[sandbox: network is off for commands]"
	markerGeneric   = "[sandbox: file access denied under %s mode]"
)

var (
	// denialLine finds the errors a denied write produces: EACCES from
	// Landlock, EROFS from a read-only bind mount, EPERM.
	denialLine = regexp.MustCompile(`(?i)permission denied|read-only file system|operation not permitted|device or resource busy`)
	// busyLine: replacing a protected file by a rename (git's lock files)
	// fails with EBUSY, since it is a mount point; EBUSY names a denial
	// of the sandbox only on a protected path.
	busyLine = regexp.MustCompile(`(?i)device or resource busy`)
	// virtual paths are bash's network redirections, not files.
	virtual = regexp.MustCompile(`^/dev/(tcp|udp)/`)
	// quoted finds the quoted operands of GNU tools ('x', ‘x’, "x", `x').
	quoted = regexp.MustCompile("'([^']+)'|‘([^’]+)’|\"([^\"]+)\"|`([^']+)'")
	// networkLine finds the errors of a command without a network.
	// Landlock's TCP denial is a "Permission denied" from connect.
	networkLine = regexp.MustCompile(`(?i)network is unreachable|connect: permission denied|could not resolve host|temporary failure in name resolution|name or service not known|name resolution|no address associated with hostname|getaddrinfo|unable to resolve host|cannot assign requested address`)
	// resolvers fail silently without a network.
	resolvers = regexp.MustCompile(`(^|[\s;&|(])(getent|host|dig|nslookup)\s`)
)

// Attribute tells whether the sandbox of plan caused f's failure, and
// returns the marker lines to append to the result and the structured
// report. It names a path only when the failed write's path, resolved
// against the workdir and through symlinks, is protected (read-only
// inside a writable root), or lies outside the writable roots where the
// server itself could write it: `echo > /etc/x` run by an ordinary user
// is the operating system's denial, not the sandbox's. When a denial
// error shows but no path can be read from it, it returns the generic
// marker. A command that succeeded, or ran in full-access mode, has no
// file markers.
func Attribute(plan *Plan, f Failure, h Host) (markers []string, r Report) {
	r = Report{Mode: plan.Mode, Network: plan.Network, Denied: []Denial{}}
	if f.ExitCode == 0 {
		return nil, r
	}
	if plan.Network == NetworkOff &&
		(networkLine.MatchString(f.Stderr) || resolvers.MatchString(" "+f.Command+" ")) {
		markers = append(markers, markerNetwork)
		r.Denied = append(r.Denied, Denial{Op: "network"})
	}
	if plan.Mode == FullAccess {
		return markers, r
	}
	unnamed := false // a denial error with no path in it
	for _, line := range strings.Split(f.Stderr, "\n") {
		if !denialLine.MatchString(line) || plan.Network == NetworkOff && networkLine.MatchString(line) {
			continue // not a denial, or the network's
		}
		paths := pathsIn(line)
		if slices.ContainsFunc(paths, virtual.MatchString) {
			continue // a connection, not a file
		}
		busy := busyLine.MatchString(line)
		if len(paths) == 0 && !busy {
			unnamed = true
			continue
		}
		for _, p := range paths {
			if len(r.Denied) >= maxNamed {
				break
			}
			if !filepath.IsAbs(p) {
				p = filepath.Join(f.Workdir, p)
			}
			p = h.Resolve(filepath.Clean(p))
			if slices.Contains(r.Denied, Denial{Path: p, Op: "write"}) {
				continue
			}
			var m string
			switch {
			case within(p, plan.Protected) && within(p, plan.Writable), busy && slices.Contains(plan.Pinned, p):
				m = fmt.Sprintf(markerProtected, p)
			case !busy && !within(p, plan.Writable) && h.CanWrite(p):
				m = fmt.Sprintf(markerWrite, p, plan.Mode, strings.Join(plan.Writable, ", "))
			default:
				continue
			}
			markers = append(markers, m)
			r.Denied = append(r.Denied, Denial{Path: p, Op: "write"})
		}
	}
	if unnamed && !slices.ContainsFunc(r.Denied, func(d Denial) bool { return d.Op == "write" }) {
		markers = append(markers, fmt.Sprintf(markerGeneric, plan.Mode))
	}
	return markers, r
}

// pathsIn returns the paths a denial line names: its quoted operands
// (touch: cannot touch '/x', Python's [Errno 13] Permission denied:
// '/x'), else the fields between ": " before the error (bash: /x:
// Permission denied).
func pathsIn(line string) []string {
	var out []string
	for _, m := range quoted.FindAllStringSubmatch(line, -1) {
		for _, g := range m[1:] {
			if g != "" && plausiblePath(g) {
				out = append(out, g)
			}
		}
	}
	if len(out) > 0 {
		return out
	}
	loc := denialLine.FindStringIndex(line)
	fields := strings.Split(line[:loc[0]], ": ")
	// The first field is the program's name ("bash", "git"), the last one
	// empty (the text before the error ends with ": "). Between them: a
	// path, "line 1", or a description ending in a path ("could not lock
	// config file .git/config"). A bare word is a path only in the shell's
	// own errors (bash: line 1: x: Permission denied); elsewhere it is
	// more likely an operation (ping: socket: ...).
	shell := len(fields) > 1 && (filepath.Base(fields[0]) == "bash" || filepath.Base(fields[0]) == "sh")
	for _, fld := range fields[1:] {
		fld = strings.TrimSpace(fld)
		if fld == "" || strings.HasPrefix(fld, "line ") {
			continue
		}
		if i := strings.LastIndexByte(fld, ' '); i >= 0 {
			fld = fld[i+1:]
		}
		if strings.Contains(fld, "/") || shell && plausiblePath(fld) {
			out = append(out, fld)
		}
	}
	return out
}

// plausiblePath: a path names a file, so it has a slash or a dot, or is a
// plain word; text with several spaces is a message.
func plausiblePath(s string) bool {
	return !strings.Contains(s, "\n") && strings.Count(s, " ") < 2 && (strings.ContainsAny(s, "/.") || !strings.Contains(s, " "))
}

// OSHost is the Host of the machine the server runs on.
type OSHost struct{}

// Resolve resolves the symlinks of the longest existing prefix of path,
// and follows a dangling symlink to its target: writing through a link
// to a file that does not exist yet creates the target, so the target is
// what the sandbox denied (docs/sandbox.md, a symlink out of the
// workspace).
func (OSHost) Resolve(path string) string { return resolve(path, maxLinks) }

// maxLinks bounds the dangling symlinks Resolve follows, as the kernel
// bounds a lookup's (ELOOP).
const maxLinks = 40

func resolve(path string, links int) string {
	rest := ""
	for p := path; ; p = filepath.Dir(p) {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Join(r, rest)
		}
		if target, err := os.Readlink(p); err == nil && links > 0 {
			if !filepath.IsAbs(target) {
				target = filepath.Join(filepath.Dir(p), target)
			}
			return resolve(filepath.Join(target, rest), links-1)
		}
		if p == filepath.Dir(p) {
			return path
		}
		rest = filepath.Join(filepath.Base(p), rest)
	}
}

// CanWrite asks the kernel whether this process could write path or, when
// path does not exist, create it in its nearest existing ancestor.
func (OSHost) CanWrite(path string) bool {
	for p := path; ; p = filepath.Dir(p) {
		if _, err := os.Lstat(p); err == nil {
			return access(p)
		}
		if p == filepath.Dir(p) {
			return false
		}
	}
}
