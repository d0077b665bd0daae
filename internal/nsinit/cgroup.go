//go:build linux

package nsinit

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// cgroups are an extra where cgroup v2 is writable (root, or a delegated
// subtree): the session gets a cgroup of its own (the init stays outside
// it), each command a cgroup inside that one, and killing what a command
// left starts with its cgroup.kill, which the kernel applies to every
// process in it at once, a fork loop included. The init's ledger still
// runs after it: root inside the namespace may move a process out.
//
// The same type serves a cgroup v1 hierarchy of a controller whose
// limits apply to each command (see limits.go): there a command cannot be
// born in its cgroup, so add opens the cgroup's tasks file instead, for
// the init to move its spawner thread in before the fork.
type cgroups struct {
	session string // the session's cgroup directory
	// limits are written into each command's cgroup: file → value.
	limits map[string]string
	// v1: a cgroup v1 hierarchy, entered through tasks; home is the
	// session cgroup's tasks file, where the init's spawner thread
	// returns after each fork.
	v1   bool
	home *os.File

	mu   sync.Mutex
	seq  int
	dirs map[string]bool // command cgroups not removed yet
	// spare is a command cgroup made ahead (refill), for the next add:
	// a spawn then waits for none of the mkdir, the limits' writes and
	// the open. making: refill is at work; closed: close has begun, and
	// nothing more is made ahead.
	spare   *commandCgroup
	making  bool
	closed  bool
	refills sync.WaitGroup
}

// commandCgroup is a command's cgroup directory and its open descriptor
// (add's results).
type commandCgroup struct {
	dir string
	f   *os.File
}

// newCgroups makes the session's cgroup under parent, after removing
// those a dead conch left there (sweepCgroups).
func newCgroups(parent string) (*cgroups, error) {
	sweepCgroups(parent)
	var b [4]byte
	if _, err := unix.Getrandom(b[:], 0); err != nil {
		return nil, fmt.Errorf("nsinit: cgroup: %w", err)
	}
	dir := filepath.Join(parent, fmt.Sprintf("conch-%d-%x", os.Getpid(), b))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("nsinit: cgroup: %w", err)
	}
	return &cgroups{session: dir, limits: make(map[string]string), dirs: make(map[string]bool)}, nil
}

// add returns a command's cgroup, with the limits, and its descriptor,
// for clone3's CLONE_INTO_CGROUP (v2), or its tasks file (v1): the one
// refill made ahead, else one made now.
func (g *cgroups) add() (string, *os.File, error) {
	g.mu.Lock()
	s := g.spare
	g.spare = nil
	g.mu.Unlock()
	if s != nil {
		return s.dir, s.f, nil
	}
	return g.make()
}

// refill makes the next command's cgroup ahead, in the background, unless
// one is ready or being made, or close has begun. Spawn calls it once its
// command runs, so that the making competes with no spawn for the CPU.
func (g *cgroups) refill() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.spare != nil || g.making || g.closed {
		return
	}
	g.making = true
	g.refills.Go(func() {
		dir, f, err := g.make()
		g.mu.Lock()
		defer g.mu.Unlock()
		g.making = false
		switch {
		case err != nil:
		case g.closed:
			f.Close() // its directory is close's to remove, with the others
		default:
			g.spare = &commandCgroup{dir: dir, f: f}
		}
	})
}

// make makes a command's cgroup with the limits and opens it (add).
func (g *cgroups) make() (string, *os.File, error) {
	g.mu.Lock()
	g.seq++
	dir := filepath.Join(g.session, "cmd-"+strconv.Itoa(g.seq))
	g.mu.Unlock()
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", nil, fmt.Errorf("nsinit: cgroup: %w", err)
	}
	f, err := g.open(dir)
	if err != nil {
		unix.Rmdir(dir)
		return "", nil, fmt.Errorf("nsinit: cgroup: %w", err)
	}
	g.mu.Lock()
	g.dirs[dir] = true
	g.mu.Unlock()
	return dir, f, nil
}

// open writes the limits into dir and opens what the init needs of it.
func (g *cgroups) open(dir string) (*os.File, error) {
	for file, v := range g.limits {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(v), 0); err != nil {
			return nil, err
		}
	}
	if g.v1 {
		return os.OpenFile(filepath.Join(dir, "tasks"), os.O_WRONLY, 0)
	}
	return os.OpenFile(dir, os.O_RDONLY|unix.O_DIRECTORY, 0)
}

// kill kills every process in the cgroup dir.
func kill(dir string) error {
	err := os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("nsinit: cgroup: %w", err)
	}
	return nil
}

// waitEmpty waits, at most d, until no process is left alive in the
// cgroup dir (cgroup.events says "populated 0"; a gone cgroup is empty).
// cgroup.kill only signals: each process leaves once it has run to its
// exit, which on a loaded machine can take a while after the write.
func waitEmpty(dir string, d time.Duration) error {
	deadline := time.Now().Add(d)
	delay := 100 * time.Microsecond
	for {
		b, err := os.ReadFile(filepath.Join(dir, "cgroup.events"))
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("nsinit: cgroup: %w", err)
		}
		if !strings.Contains(string(b), "populated 1") {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nsinit: cgroup %s: still populated %v after its kill", dir, d)
		}
		time.Sleep(delay)
		delay = min(2*delay, 10*time.Millisecond)
	}
}

// remove removes the cgroup dir if it is empty; a cgroup that still
// holds a process (something the command left running) stays, for a
// later remove.
func (g *cgroups) remove(dir string) {
	if err := unix.Rmdir(dir); err == nil || err == unix.ENOENT {
		g.mu.Lock()
		delete(g.dirs, dir)
		g.mu.Unlock()
	}
}

// close kills and removes what is left, the session's cgroup last. A
// killed process leaves its cgroup a moment after it dies, so removing
// is retried for a while.
func (g *cgroups) close() error {
	if g.home != nil {
		g.home.Close()
	}
	g.mu.Lock()
	g.closed = true
	spare := g.spare
	g.spare = nil
	g.mu.Unlock()
	g.refills.Wait()
	if spare != nil {
		spare.f.Close()
	}
	g.mu.Lock()
	dirs := make([]string, 0, len(g.dirs))
	for d := range g.dirs {
		dirs = append(dirs, d)
	}
	g.mu.Unlock()
	for _, d := range dirs {
		kill(d)
	}
	deadline := time.Now().Add(time.Second)
	for {
		for _, d := range dirs {
			g.remove(d)
		}
		err := unix.Rmdir(g.session)
		if err == nil || err == unix.ENOENT {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nsinit: cgroup: remove %s: %w", g.session, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// sweepCgroups removes the empty session cgroups under parent whose
// server is dead: a server that was SIGKILLed could not remove its own
// (the kernel killed what ran in them, but leaves the directories). A
// session cgroup is named conch-<server pid>-<random>; one whose server
// pid is alive (this one, another conch, or a process that reused the
// pid) is left alone, and so is one that still holds a process (rmdir
// refuses it).
func sweepCgroups(parent string) {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), "conch-")
		if !ok || !e.IsDir() {
			continue
		}
		pidText, _, ok := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if !ok || err != nil || pid <= 0 || unix.Kill(pid, 0) != unix.ESRCH {
			continue
		}
		dir := filepath.Join(parent, e.Name())
		if cmds, err := os.ReadDir(dir); err == nil {
			for _, c := range cmds {
				if c.IsDir() && strings.HasPrefix(c.Name(), "cmd-") {
					unix.Rmdir(filepath.Join(dir, c.Name()))
				}
			}
		}
		unix.Rmdir(dir)
	}
}
