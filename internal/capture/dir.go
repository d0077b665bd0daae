package capture

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Why a spill file is unavailable, for Stream.SpillErr.
var (
	// ErrSpillTooLarge: the stream passed its maxSpill, so its file was
	// deleted rather than left incomplete. Stream.SpillErr reports it as
	// a *shell.SpillCapError naming the cap.
	ErrSpillTooLarge = errors.New("spill: stream passed its spill cap")
	// ErrBudget: the Dir's total budget had no room left, even after
	// evicting the files of finished streams.
	ErrBudget = errors.New("spill: directory budget exhausted")
	// ErrEvicted: a newer stream needed the room and this finished
	// stream's file was the oldest.
	ErrEvicted = errors.New("spill: evicted to make room for newer output")
	// ErrDirClosed: the Dir was closed, which removes every file.
	ErrDirClosed = errors.New("spill: directory closed")
	// ErrNoDir: the stream was made without a Dir.
	ErrNoDir = errors.New("spill: no spill directory")
)

// errDropped marks a file its own stream deleted; the stream keeps the
// real reason.
var errDropped = errors.New("spill: dropped by its stream")

// createAttempts bounds the retries when a name is already taken. With
// 128 random bits a clash means someone planted the name, so a few tries
// are plenty and endless ones would only help an attacker waste our time.
const createAttempts = 4

// randomName gives the unguessable part of a spill file's name. It is a
// variable so that a test can force a clash with a planted symlink.
var randomName = func() string {
	var b [16]byte
	rand.Read(b[:]) // never fails (crypto/rand panics rather than return short)
	return hex.EncodeToString(b[:])
}

// Dir is one executor's private spill directory with a budget for the sum
// of all its files.
//
// A full stream on disk lets a model grep what did not fit in its tail,
// but a busy server must not fill the disk, and other local users must
// not read the output or trick conch into writing through a link: hence
// one 0700 directory, created only when something spills, exclusive
// 0600 files with random names, and a budget that sacrifices the oldest
// finished output before live output.
//
// A Dir's view for one owner (For) puts that owner's files in a
// subdirectory of their own, under the same budget: a contained
// session's commands are shown their own subdirectory only
// (docs/containment.md#spill-files).
//
// Lock order: a Stream's mutex before its Dir's; a Dir never calls into
// a Stream.
type Dir struct {
	parent string
	budget int64
	// shared: parent is the user's spill root (UserRoot), made on first
	// use, under which the spill directories of all the user's servers
	// live.
	shared bool

	// A view made by For: base is the Dir whose directory and budget it
	// shares (nil for that Dir itself), sub its subdirectory's name.
	base *Dir
	sub  string

	mu     sync.Mutex
	path   string // "" until the first spill
	closed bool
	used   int64        // sum of the sizes of files
	files  []*spillFile // live files, oldest first
}

// spillFile is one stream's file. path and f are fixed at creation; the
// other fields belong to the Dir's mutex.
type spillFile struct {
	path string
	f    *os.File

	size int64 // bytes reserved in the budget (written or about to be)
	done bool  // its stream closed the file cleanly: it may be evicted
	gone error // non-nil once the file is deleted; says why
}

// NewDir returns a spill directory under parent ("" means the user's
// spill root, UserRoot) whose files may hold at most budget bytes in
// total. Nothing is created until a stream spills. NewDir panics if
// budget is not positive.
func NewDir(parent string, budget int64) *Dir {
	if budget <= 0 {
		panic(fmt.Sprintf("capture: spill budget must be positive, got %d", budget))
	}
	if parent == "" {
		return &Dir{parent: UserRoot(), budget: budget, shared: true}
	}
	return &Dir{parent: parent, budget: budget}
}

// UserRoot is the directory under which the spill directories of every
// conch server of this user live: conch-<uid> in os.TempDir(), mode 0700.
// One place for all of them lets a contained session hide every spill
// directory but its own, another server's included
// (docs/containment.md#spill-files).
func UserRoot() string {
	return filepath.Join(os.TempDir(), "conch-"+strconv.Itoa(os.Geteuid()))
}

// ensureUserRoot makes root (UserRoot) if needed and checks that it is
// this user's own private directory, not one planted by another user of
// a shared temp dir (nor a symbolic link).
func ensureUserRoot(root string) error {
	if err := os.Mkdir(root, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	fi, err := os.Lstat(root)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%s is not a directory of uid %d", root, os.Geteuid())
	}
	if fi.Mode().Perm() != 0o700 {
		return os.Chmod(root, 0o700)
	}
	return nil
}

// Root returns the directory whose other entries a session of this Dir
// may be kept from seeing: the user's spill root (UserRoot) when d's
// directory was made there, else d's own directory (its subdirectories
// are the sessions'). It is "" before the first spill or Ensure.
func (d *Dir) Root() string {
	d = d.root()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.path == "" {
		return ""
	}
	if d.shared && filepath.Dir(d.path) == d.parent {
		return d.parent
	}
	return d.path
}

// For returns the view of d for owner: its streams' files go to a
// subdirectory of d's directory (mode 0700) named after owner by a hash
// (the same name for the same owner every time), and count against d's
// budget as every other file of d. Nothing is created until a stream of
// the view spills or Ensure is called.
func (d *Dir) For(owner string) *Dir {
	sum := sha256.Sum256([]byte(owner))
	return &Dir{base: d.root(), sub: "s-" + hex.EncodeToString(sum[:12])}
}

// root is the Dir that holds the directory and the budget: d itself, or
// the Dir d is a view of.
func (d *Dir) root() *Dir {
	if d.base != nil {
		return d.base
	}
	return d
}

// Path returns the directory's path (a view's: its subdirectory's): ""
// before the first spill, and still the old path after Close.
func (d *Dir) Path() string {
	sub := d.sub
	d = d.root()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.path == "" {
		return ""
	}
	return filepath.Join(d.path, sub)
}

// Ensure creates the directory (a view's subdirectory too) if it does not
// exist yet, and returns its path: for a contained session, whose
// boundary is built around its spill directory before its first command
// runs.
func (d *Dir) Ensure() (string, error) {
	sub := d.sub
	d = d.root()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return "", ErrDirClosed
	}
	return d.dirLocked(sub)
}

// dirLocked creates d's directory and its subdirectory sub ("" for none)
// as needed and returns the latter's path. d.mu must be held.
func (d *Dir) dirLocked(sub string) (string, error) {
	if d.path == "" {
		parent := d.parent
		if d.shared {
			if err := ensureUserRoot(parent); err != nil {
				// Another user's, say: a directory of our own in the
				// temp dir, as before there was a root.
				parent = filepath.Dir(parent)
			}
		}
		// MkdirTemp creates the directory 0700 with a random name.
		p, err := os.MkdirTemp(parent, "conch-spill-*")
		if errors.Is(err, fs.ErrNotExist) && d.shared && parent == d.parent {
			// Another server removed the root, empty, as it closed.
			if ensureUserRoot(parent) == nil {
				p, err = os.MkdirTemp(parent, "conch-spill-*")
			}
		}
		if err != nil {
			return "", fmt.Errorf("spill: create directory in %s: %w", parent, err)
		}
		d.path = p
	}
	if sub == "" {
		return d.path, nil
	}
	p := filepath.Join(d.path, sub)
	err := os.Mkdir(p, 0o700)
	if errors.Is(err, fs.ErrExist) {
		// Made by an earlier spill; a symlink planted in its place must
		// not be followed.
		fi, lerr := os.Lstat(p)
		if lerr == nil && fi.IsDir() {
			return p, nil
		}
	}
	if err != nil {
		return "", fmt.Errorf("spill: create directory %s: %w", p, err)
	}
	return p, nil
}

// Close removes the directory and every file in it (a view's Close: of
// the Dir it is a view of); streams that were spilling lose their files
// and report no path. A stream that overflows later gets no spill file.
// Close is idempotent: only the first call can return an error.
func (d *Dir) Close() error {
	d = d.root()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	for _, sp := range d.files {
		sp.gone = ErrDirClosed
		if !sp.done {
			// Release the disk now, not when the writer next wakes
			// up; os.File tolerates a Close racing a Write.
			sp.f.Close()
		}
	}
	d.files, d.used = nil, 0
	if d.path == "" {
		return nil
	}
	if err := os.RemoveAll(d.path); err != nil {
		return fmt.Errorf("spill: remove %s: %w", d.path, err)
	}
	if d.shared {
		os.Remove(d.parent) // the user's spill root, if no other server uses it
	}
	return nil
}

// create makes a new spill file for stream name and reserves n bytes of
// the budget for what the caller is about to write into it.
func (d *Dir) create(name string, n int64) (*spillFile, error) {
	sub := d.sub
	d = d.root()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, ErrDirClosed
	}
	if n > d.budget {
		return nil, ErrBudget // no eviction could help
	}
	dir, err := d.dirLocked(sub)
	if err != nil {
		return nil, err
	}
	var (
		path string
		f    *os.File
	)
	for range createAttempts {
		path = filepath.Join(dir, randomName()+"-"+name)
		// O_EXCL fails on any existing name, a dangling symlink
		// included; O_NOFOLLOW says so twice. Creating under d.mu
		// keeps Close from removing the directory under our feet.
		f, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|oNoFollow, 0o600)
		if err == nil || !errors.Is(err, fs.ErrExist) && !isLoop(err) {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("spill: create %s: %w", path, err)
	}
	sp := &spillFile{path: path, f: f}
	if !d.makeRoomLocked(n, sp) {
		f.Close()
		os.Remove(path)
		return nil, ErrBudget
	}
	sp.size = n
	d.used += n
	d.files = append(d.files, sp)
	return sp, nil
}

// reserve accounts for n more bytes the caller is about to append to sp.
func (d *Dir) reserve(sp *spillFile, n int64) error {
	d = d.root()
	d.mu.Lock()
	defer d.mu.Unlock()
	if sp.gone != nil {
		return sp.gone
	}
	if sp.size+n > d.budget || !d.makeRoomLocked(n, sp) {
		return ErrBudget // checked first: evicting others could not help
	}
	sp.size += n
	d.used += n
	return nil
}

// makeRoomLocked evicts the oldest files of finished streams until n more
// bytes fit. Live streams are never evicted: their output is the one a
// model is most likely still to want.
func (d *Dir) makeRoomLocked(n int64, keep *spillFile) bool {
	for d.used+n > d.budget {
		i := 0
		for i < len(d.files) && (!d.files[i].done || d.files[i] == keep) {
			i++
		}
		if i == len(d.files) {
			return false
		}
		d.removeLocked(i, ErrEvicted)
	}
	return true
}

func (d *Dir) removeLocked(i int, why error) {
	sp := d.files[i]
	sp.gone = why
	d.used -= sp.size
	d.files = append(d.files[:i], d.files[i+1:]...)
	os.Remove(sp.path)
}

// drop deletes sp on behalf of its stream. It returns the reason the Dir
// had already deleted it, if it had.
func (d *Dir) drop(sp *spillFile) error {
	d = d.root()
	d.mu.Lock()
	defer d.mu.Unlock()
	if sp.gone != nil {
		return sp.gone
	}
	for i, x := range d.files {
		if x == sp {
			d.removeLocked(i, errDropped)
			break
		}
	}
	return nil
}

// finish marks sp complete (its stream closed it without error), which
// makes it a candidate for eviction.
func (d *Dir) finish(sp *spillFile) error {
	d = d.root()
	d.mu.Lock()
	defer d.mu.Unlock()
	if sp.gone != nil {
		return sp.gone
	}
	sp.done = true
	return nil
}

// goneErr returns why sp was deleted, or nil while it exists.
func (d *Dir) goneErr(sp *spillFile) error {
	d = d.root()
	d.mu.Lock()
	defer d.mu.Unlock()
	return sp.gone
}

// usedBytes is the budget in use, for tests.
func (d *Dir) usedBytes() int64 {
	d = d.root()
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.used
}

func checkName(name string) {
	if name == "" || strings.ContainsAny(name, "/\x00") || name == "." || name == ".." {
		panic(fmt.Sprintf("capture: bad stream name %q", name))
	}
}
