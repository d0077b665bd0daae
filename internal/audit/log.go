package audit

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/conch-dev/conch/internal/envpolicy"
	"github.com/conch-dev/conch/ops"
)

// DefaultMaxBytes is the size past which the log rotates: 64 MiB.
const DefaultMaxBytes = 64 << 20

// DefaultPath is the audit log of a user: audit.jsonl in conch's state
// directory (stateDir, $XDG_STATE_HOME/conch or ~/.local/state/conch),
// which commands cannot reach (docs/security.md).
func DefaultPath(stateDir string) string { return filepath.Join(stateDir, "audit.jsonl") }

// Options configures a Log. A nil *Options means all defaults.
type Options struct {
	// MaxBytes is the size a file may reach before the log rotates
	// (default DefaultMaxBytes). A single line longer than that gets a
	// file of its own.
	MaxBytes int64
	// Logger receives the reports of failed writes (default: discard).
	Logger *slog.Logger
	// Redact replaces the secrets in a free-text value (default
	// envpolicy.Redact).
	Redact func(string) string
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Log is an audit log: an ops.Recorder that writes the audited events
// (ops.Kind.Audited) and ignores the rest. Create it with Open and end it
// with Close; it is safe for concurrent use.
//
// Record queues an event and returns; one goroutine of the Log writes the
// queue in order, each time all that is waiting with one write(2) under
// one lock, so that the caller pays microseconds and a burst of events
// costs one round of system calls (docs/operations.md#cost). The queue
// holds QueueLen events; a Record that finds it full waits, so that no
// event is dropped for being too many.
type Log struct {
	path string
	opts Options

	mu     sync.RWMutex // guards closed against the queue's close
	closed bool
	queue  chan item
	done   chan struct{} // closed when the writer has ended

	// The writer's own; nothing else touches them.
	f    *os.File // the live file, O_APPEND; nil until the first write and after a failure
	lock *os.File // path + ".lock"
	ino  uint64   // f's inode, to see a rotation by another process
	// checked is when path was last seen to be f.
	checked time.Time
	end     int64  // f's size after our last write; -1: unknown
	seq     uint64 // the seq of the last line of the chain
	prev    string // its hash
	buf     []byte

	failures atomic.Int64
	failing  bool      // the last write failed
	reported time.Time // when a failure was last logged
}

// QueueLen is how many events a Log holds before Record waits.
const QueueLen = 4096

// maxBatch bounds the lines of one write.
const maxBatch = 512

// item is a queued event and when it happened, or (e nil) a Sync's mark.
type item struct {
	at     time.Time
	e      ops.Event
	synced chan struct{}
}

// Open returns the log at path, an absolute path; its directory is made
// (0700) and its file created (0600) at the first line, so a server that
// records nothing leaves nothing behind, and a path that cannot be written
// yet does not stop conch (the writer reports it).
func Open(path string, opts *Options) (*Log, error) {
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("audit: %q is not an absolute path", path)
	}
	l := &Log{path: filepath.Clean(path), end: -1, queue: make(chan item, QueueLen), done: make(chan struct{})}
	if opts != nil {
		l.opts = *opts
	}
	if l.opts.MaxBytes <= 0 {
		l.opts.MaxBytes = DefaultMaxBytes
	}
	if l.opts.Logger == nil {
		l.opts.Logger = slog.New(slog.DiscardHandler)
	}
	if l.opts.Redact == nil {
		l.opts.Redact = envpolicy.Redact
	}
	if l.opts.Now == nil {
		l.opts.Now = time.Now
	}
	go l.run()
	return l, nil
}

// Path is the live file's path.
func (l *Log) Path() string { return l.path }

// Failures counts the events the log could not write.
func (l *Log) Failures() int64 { return l.failures.Load() }

// Record queues e, if it is of an audited kind, as the chain's next line,
// stamped with the time of the call. After Close it does nothing.
func (l *Log) Record(_ context.Context, e ops.Event) {
	if !e.EventKind().Audited() {
		return
	}
	l.put(item{at: l.opts.Now(), e: e})
}

func (l *Log) put(it item) bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return false
	}
	l.queue <- it
	return true
}

// Sync returns once every event recorded before it is written or has
// failed to be.
func (l *Log) Sync() {
	it := item{synced: make(chan struct{})}
	if l.put(it) {
		<-it.synced
	}
}

// Close writes what is queued, then closes the log's files; Record does
// nothing afterwards.
func (l *Log) Close() error {
	l.mu.Lock()
	if !l.closed {
		l.closed = true
		close(l.queue)
	}
	l.mu.Unlock()
	<-l.done
	return nil
}

// run is the writer: it writes what is queued, as it comes, until Close.
func (l *Log) run() {
	defer close(l.done)
	defer l.drop()
	batch := make([]item, 0, maxBatch)
	for it := range l.queue {
		batch = append(batch[:0], it)
	more:
		for len(batch) < maxBatch {
			select {
			case it, ok := <-l.queue:
				if !ok {
					break more
				}
				batch = append(batch, it)
			default:
				break more
			}
		}
		l.writeBatch(batch)
		for i := range batch {
			if batch[i].synced != nil {
				close(batch[i].synced)
			}
			batch[i] = item{}
		}
	}
}

// writeBatch writes a batch and reports what it could not.
func (l *Log) writeBatch(batch []item) {
	lost, err := l.write(batch)
	if err != nil {
		l.failures.Add(int64(lost))
		l.drop()
		if !l.failing || time.Since(l.reported) >= time.Minute {
			l.opts.Logger.Error("audit log: an event was not written; commands go on", "path", l.path, "error", err, "failures", l.failures.Load())
			l.reported = time.Now()
		}
		l.failing = true
		return
	}
	if l.failing && lost == 0 {
		l.opts.Logger.Warn("audit log: writing again", "path", l.path, "failures", l.failures.Load())
		l.failing = false
	}
}

// drop closes the files, so that the next write opens them again and
// re-reads the chain's end.
func (l *Log) drop() {
	if l.f != nil {
		l.f.Close()
		l.f = nil
	}
	if l.lock != nil {
		l.lock.Close()
		l.lock = nil
	}
	l.end = -1
}

// write appends the batch's lines under the cross-process lock, rotating
// first where a line would take the file past MaxBytes. On an error it
// returns how many of the batch's events were not written.
func (l *Log) write(batch []item) (lost int, err error) {
	n := 0
	for _, it := range batch {
		if it.e != nil {
			n++
		}
	}
	if n == 0 {
		return 0, nil
	}
	if l.lock == nil {
		if err := os.MkdirAll(filepath.Dir(l.path), 0o700); err != nil {
			return n, err
		}
		lf, err := openPrivate(l.path+".lock", os.O_RDWR|os.O_CREATE)
		if err != nil {
			return n, err
		}
		l.lock = lf
	}
	if err := flock(l.lock, unix.LOCK_EX); err != nil {
		return n, fmt.Errorf("lock: %w", err)
	}
	defer flock(l.lock, unix.LOCK_UN)

	if err := l.sync(); err != nil {
		return n, err
	}
	b := l.buf[:0]
	pending := 0 // events in b
	flush := func() error {
		if len(b) == 0 {
			return nil
		}
		if _, err := l.f.Write(b); err != nil {
			return err
		}
		l.end += int64(len(b))
		n -= pending
		b, pending = b[:0], 0
		return nil
	}
	for _, it := range batch {
		if it.e == nil {
			continue
		}
		start := len(b)
		b = l.appendLine(b, it)
		if size := l.end + int64(len(b)); size > l.opts.MaxBytes && size-int64(len(b)-start) > 0 {
			line := append([]byte(nil), b[start:]...)
			b = b[:start]
			if err := flush(); err != nil {
				return n, err
			}
			if err := l.rotate(); err != nil {
				return n, fmt.Errorf("rotate: %w", err)
			}
			b = append(b, line...)
			start = 0
		}
		pending++
		l.seq++
		l.prev = hashLine(b[start : len(b)-1])
	}
	err = flush()
	l.buf = b
	if cap(l.buf) > 1<<20 {
		l.buf = nil // a burst of huge commands must not pin its buffer
	}
	return n, err
}

// sync makes l.f the live file and l.seq, l.prev the chain's end, reading
// them from the files when another process wrote or rotated since our
// last write, or when this is the first.
func (l *Log) sync() error {
	var fi os.FileInfo
	if l.f != nil {
		var err error
		if fi, err = l.f.Stat(); err != nil {
			return err
		}
		// Another conch that rotated this file made it read-only; an
		// unlinked file has no links. Anyone else moving it is seen
		// within a second.
		if fi.Mode().Perm() != 0o600 || nlink(fi) == 0 || time.Since(l.checked) >= time.Second {
			cur, err := os.Stat(l.path)
			if err != nil || inode(cur) != l.ino {
				l.f.Close()
				l.f, l.end = nil, -1
			}
			l.checked = time.Now()
		}
	}
	if l.f == nil {
		f, err := openPrivate(l.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE)
		if err != nil {
			return err
		}
		if fi, err = f.Stat(); err != nil {
			f.Close()
			return err
		}
		l.f, l.ino, l.checked = f, inode(fi), time.Now()
	}
	if fi.Size() == l.end {
		return nil
	}
	l.end = fi.Size()
	return l.readEnd()
}

// readEnd sets l.seq and l.prev from the last line of the live file or,
// when it is empty, of the newest rotated file; with neither, the chain
// starts. A last line without its newline (cut by a crash or a full
// disk) counts as the chain's end: the next line starts on a new line.
func (l *Log) readEnd() error {
	path, size := l.path, l.end
	if size == 0 {
		set, err := Set(l.path)
		if err != nil {
			return err
		}
		if len(set) < 2 {
			l.seq, l.prev = 0, ""
			return nil
		}
		path = set[len(set)-2]
		fi, err := os.Stat(path)
		if err != nil {
			return err
		}
		size = fi.Size()
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	last, complete, err := lastLine(f, size)
	if err != nil {
		return err
	}
	seq, ok := lineSeq(last)
	if !ok {
		// A cut or mangled last line takes the seq after the line
		// before it; Verify reports it, and the chain goes on past it.
		before, _, err := lastLine(f, size-int64(len(last))-boolInt(complete))
		if err != nil {
			return err
		}
		if seq, ok = lineSeq(before); !ok {
			return fmt.Errorf("%s: its last lines are not audit lines; move the file away to start a new chain", path)
		}
		seq++
	}
	l.seq, l.prev = seq, hashLine(last)
	if !complete && path == l.path {
		// End the cut line, so that ours starts on a line of its own.
		if _, err := l.f.Write([]byte{'\n'}); err != nil {
			return err
		}
		l.end++
	}
	return nil
}

// appendLine appends the chain's next line for it, ending in a newline.
func (l *Log) appendLine(b []byte, it item) []byte {
	e := ops.Redact(it.e, l.opts.Redact)
	b = append(b, `{"time":"`...)
	b = it.at.UTC().AppendFormat(b, "2006-01-02T15:04:05.000000Z")
	b = append(b, `","seq":`...)
	b = strconv.AppendUint(b, l.seq+1, 10)
	b = append(b, `,"prev":"`...)
	b = append(b, l.prev...)
	b = append(b, `","owner":`...)
	b = ops.AppendString(b, ops.Owner(e))
	b = append(b, `,"event":"`...)
	b = append(b, e.EventKind()...)
	b = append(b, '"')
	b = ops.AppendFields(b, e)
	return append(b, '}', '\n')
}

// rotate moves the live file to "<path>.<seq of its first line>" and
// opens a new one.
func (l *Log) rotate() error {
	first := l.seq + 1 // if the file's first line cannot be read
	if f, err := os.Open(l.path); err == nil {
		var b [4096]byte
		n, _ := io.ReadFull(f, b[:])
		f.Close()
		if line, _, _ := bytes.Cut(b[:n], []byte{'\n'}); len(line) > 0 {
			if s, ok := lineSeq(line); ok {
				first = s
			}
		}
	}
	to := l.path + "." + strconv.FormatUint(first, 10)
	if _, err := os.Lstat(to); err == nil {
		to += "-" + strconv.FormatInt(l.opts.Now().UnixNano(), 10)
	}
	if err := os.Rename(l.path, to); err != nil {
		return err
	}
	// Read-only from now on: the sign, for the other writers that hold
	// it open, that it is no longer the live file.
	l.f.Chmod(0o400)
	l.f.Close()
	f, err := openPrivate(l.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|os.O_EXCL)
	if err != nil {
		l.f = nil
		return err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		l.f = nil
		return err
	}
	l.f, l.ino, l.end = f, inode(fi), 0
	return nil
}

// openPrivate opens a file of the log: created 0600, never through a
// symbolic link, never blocking on a FIFO, and only a regular file.
func openPrivate(path string, flag int) (*os.File, error) {
	f, err := os.OpenFile(path, flag|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("%s: not a regular file", path)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func flock(f *os.File, how int) error {
	for {
		err := unix.Flock(int(f.Fd()), how)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

func nlink(fi os.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 1
}

func inode(fi os.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Ino)
	}
	return 0
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// hashLine is the chain's hash of a line: SHA-256 of its bytes without
// the newline, in hex.
func hashLine(line []byte) string {
	h := sha256.Sum256(line)
	return hex.EncodeToString(h[:])
}

// lastLine returns the last line of the first size bytes of f, without
// its newline, and whether it had one.
func lastLine(f *os.File, size int64) (line []byte, complete bool, err error) {
	if size == 0 {
		return nil, true, nil
	}
	var lastByte [1]byte
	if _, err := f.ReadAt(lastByte[:], size-1); err != nil {
		return nil, false, err
	}
	complete = lastByte[0] == '\n'
	end := size
	if complete {
		end--
	}
	const chunk = 8 << 10
	for off := end; off > 0; {
		n := min(chunk, off)
		off -= n
		b := make([]byte, n)
		if _, err := f.ReadAt(b, off); err != nil {
			return nil, false, err
		}
		if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
			return append(b[i+1:], line...), complete, nil
		}
		line = append(b, line...)
	}
	return line, complete, nil
}
