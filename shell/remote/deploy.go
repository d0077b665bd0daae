package remote

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path"
	"runtime"
	"strings"
	"sync"
)

// RunScript runs script with the host's POSIX shell, feeding it stdin
// (nil: none), and returns its standard output; an error names what the
// script wrote on its standard error. Each transport has its own: a
// session over SSH, an engine's exec for a container.
type RunScript func(ctx context.Context, script string, stdin io.Reader) (string, error)

// PlatformError is a host of another OS or architecture that has no conch
// of its own at Path.
type PlatformError struct {
	Host, OS, Arch, Path string
}

func (e *PlatformError) Error() string {
	return fmt.Sprintf("host %s: no conch for %s/%s there; install it at %s", e.Host, e.OS, e.Arch, e.Path)
}

// FileSHA256 is the sha256 of the file at path, in hex.
func FileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Deployed is where Probe found, or Deploy put, the agent on a host.
type Deployed struct {
	// Path is the agent binary on the host.
	Path string
	// Home is the host user's home directory ($HOME there).
	Home string
	// Current: the binary at Path is the one to run (this conch, or a
	// conch the user installed for another platform); else it must be
	// uploaded.
	Current bool
}

// cacheDir is where deployed agents live on the host: the remote user's
// cache (XDG_CACHE_HOME, else ~/.cache), under conch/.
const cacheDir = `"${XDG_CACHE_HOME:-$HOME/.cache}/conch"`

// Deploy makes sure the host called host, reached through run, has the
// conch at binary (whose sha256 is binHash): Probe, then Upload when the
// host lacks it.
func Deploy(ctx context.Context, host string, run RunScript, binary, binHash string) (Deployed, error) {
	dep, err := Probe(ctx, host, run, binHash)
	if err == nil && !dep.Current {
		err = dep.Upload(ctx, run, binary, binHash)
	}
	return dep, err
}

// Probe looks, on the host called host reached through run, for the conch
// whose sha256 is binHash at its versioned path: conch-<first 16 hex
// digits of its sha256>, in the host user's cache. A file there whose
// checksum differs (a cut upload, a corrupted disk) is not Current; a
// host of another OS or architecture is a *PlatformError unless a conch
// the user installed for it is there.
func Probe(ctx context.Context, host string, run RunScript, binHash string) (Deployed, error) {
	name := "conch-" + binHash[:16]
	probe := `set -u; d=` + cacheDir + `; uname -sm; printf '%s\n' "$d/` + name + `" "$HOME"; ` +
		`if [ -x "$d/` + name + `" ]; then sha256sum < "$d/` + name + `" | cut -c1-64; else echo none; fi`
	out, err := run(ctx, probe, nil)
	if err != nil {
		return Deployed{}, fmt.Errorf("probe: %w", err)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 4 {
		return Deployed{}, fmt.Errorf("probe: unexpected answer %q", out)
	}
	goos, goarch := platform(lines[0])
	dep := Deployed{Path: lines[1], Home: lines[2]}
	sum := lines[3]
	if goos != runtime.GOOS || goarch != runtime.GOARCH {
		if sum == "none" {
			return Deployed{}, &PlatformError{Host: host, OS: goos, Arch: goarch, Path: dep.Path}
		}
		dep.Current = true // a conch the user installed there for its own platform
		return dep, nil
	}
	dep.Current = sum == binHash
	return dep, nil
}

// removeOld is the part of the upload script that removes, once the new
// build $f is in place, the other builds of its directory (conch-<16 hex
// digits>) that no process of the remote user runs (its /proc/<pid>/exe):
// a build in use is another local conch's agent, whose init re-executes
// that file. Temporary uploads an hour old were cut and are removed too.
// Another conch whose build was removed uploads it again on its next
// connection.
const removeOld = `inuse=$(ls -l /proc/[0-9]*/exe 2>/dev/null || true); ` +
	`for o in "$d"/conch-????????????????; do ` +
	`[ "$o" != "$f" ] && [ -f "$o" ] || continue; ` +
	`case "${o##*/conch-}" in *[!0-9a-f]*) continue;; esac; ` +
	`case "$inuse" in *" -> $o"*) continue;; esac; ` +
	`rm -f "$o"; done; ` +
	`find "$d" -maxdepth 1 -name '.upload-*' -mmin +60 -exec rm -f {} + 2>/dev/null || true`

// Upload copies binary (whose sha256 is binHash) to d.Path on the host
// through a temporary file that is checked against binHash before it is
// renamed, then removes the older builds there (removeOld).
func (d Deployed) Upload(ctx context.Context, run RunScript, binary, binHash string) error {
	path := d.Path
	f, err := os.Open(binary)
	if err != nil {
		return fmt.Errorf("upload: %w", err)
	}
	defer f.Close()
	script := `set -eu; f=` + ShellQuote(path) + `; d=$(dirname "$f"); mkdir -p "$d"; chmod 700 "$d"; ` +
		`t=$(mktemp "$d/.upload-XXXXXX"); trap 'rm -f "$t"' EXIT; cat > "$t"; ` +
		`s=$(sha256sum < "$t" | cut -c1-64); if [ "$s" != ` + binHash + ` ]; then echo "checksum $s after upload" >&2; exit 1; fi; ` +
		`chmod 700 "$t"; mv -f "$t" "$f"; trap - EXIT; ` + removeOld
	if _, err := run(ctx, script, f); err != nil {
		return fmt.Errorf("upload conch to %s: %w", path, err)
	}
	return nil
}

// platform maps `uname -sm` to Go's names.
func platform(uname string) (goos, goarch string) {
	f := strings.Fields(uname)
	if len(f) != 2 {
		return strings.ToLower(uname), "unknown"
	}
	goos = strings.ToLower(f[0])
	switch f[1] {
	case "x86_64", "amd64":
		goarch = "amd64"
	case "aarch64", "arm64":
		goarch = "arm64"
	case "i386", "i486", "i586", "i686":
		goarch = "386"
	case "armv6l", "armv7l":
		goarch = "arm"
	default:
		goarch = strings.ToLower(f[1])
	}
	return goos, goarch
}

// ShellQuote quotes s for a POSIX shell.
func ShellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// StderrTail keeps the end of an agent's standard error, for the error
// of an agent that exited at start (Last names its cause).
type StderrTail struct {
	mu  sync.Mutex
	buf []byte
}

const stderrTailBytes = 2048

// Write implements io.Writer.
func (t *StderrTail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - stderrTailBytes; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

// Last is the last non-empty line written.
func (t *StderrTail) Last() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := strings.Split(strings.TrimSpace(string(t.buf)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// Prepared is an agent made ready to start on a host whose transport has
// no login directory of its own (a container's exec starts in the image's
// working directory, often /).
type Prepared struct {
	// Path is the agent binary on the host.
	Path string
	// Cwd is the agent's working directory: the host's cwd, else its
	// user's home.
	Cwd string
}

// Prepare deploys the agent at binary (whose sha256 is binHash) on the
// host called host, reached through run, as Deploy does, and picks its
// working directory: cwd, else the host user's home. A home that is not
// an absolute path other than / is refused before anything is copied: an
// agent that took / as the workspace of workspace-write would let its
// commands write anywhere. The transports of containers share it.
func Prepare(ctx context.Context, host string, run RunScript, binary, binHash, cwd string) (Prepared, error) {
	dep, err := Probe(ctx, host, run, binHash)
	if err != nil {
		return Prepared{}, err
	}
	if cwd == "" {
		if !path.IsAbs(dep.Home) || path.Clean(dep.Home) == "/" {
			return Prepared{}, fmt.Errorf("the container's user has no home directory to work in (HOME=%q); set the host's cwd", dep.Home)
		}
		cwd = dep.Home
	}
	if !dep.Current {
		if err := dep.Upload(ctx, run, binary, binHash); err != nil {
			return Prepared{}, err
		}
	}
	return Prepared{Path: dep.Path, Cwd: cwd}, nil
}

// Argv is the command line that starts the prepared agent with args, and
// with --cwd its working directory unless args name one.
func (p Prepared) Argv(args []string) []string {
	argv := append([]string{p.Path, "agent"}, args...)
	for _, a := range args {
		if a == "--cwd" || strings.HasPrefix(a, "--cwd=") {
			return argv
		}
	}
	return append(argv, "--cwd", p.Cwd)
}
