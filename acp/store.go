package acp

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Record types of a session file.
const (
	recSession = "session" // first line: the session's id and cwd
	recPrompt  = "prompt"  // what the user typed
	recCall    = "call"    // a tool call as drawn
	recResult  = "result"  // its result
	recMessage = "message" // an agent message (a notice, the help text)
)

// recordVersion is the version of the session file format.
const recordVersion = 1

// maxRecordLine bounds one line of a session file; a longer line is
// skipped on load.
const maxRecordLine = 32 << 20

// maxSessionFile bounds what a load reads: a larger session file is
// refused rather than held in memory and replayed, and a file that grows
// past it while it is read is read no further.
const maxSessionFile = 128 << 20

// record is one line of a session file.
type record struct {
	Type string `json:"type"`
	Time string `json:"time,omitempty"`
	// session
	Version int    `json:"version,omitempty"`
	Session string `json:"session,omitempty"`
	// session, call: the session cwd the call ran in
	Cwd string `json:"cwd,omitempty"`
	// prompt, message
	Text string `json:"text,omitempty"`
	// call, result
	ToolCallID string          `json:"toolCallId,omitempty"`
	Tool       string          `json:"tool,omitempty"`
	Args       json.RawMessage `json:"args,omitempty"`
	Texts      []string        `json:"texts,omitempty"`
	IsError    bool            `json:"isError,omitempty"`
	// result: what the call's terminal card received live (its live
	// updates and the final one together), drawn again on replay; absent
	// for a call whose card was not fed live.
	Card *string `json:"card,omitempty"`
}

// check reports what makes a decoded record unusable, or nil.
func (r record) check() error {
	switch r.Type {
	case recSession:
		if r.Session == "" {
			return errors.New("session record without a session id")
		}
	case recPrompt, recMessage:
	case recCall:
		if r.ToolCallID == "" || r.Tool == "" {
			return errors.New("call record without a toolCallId or tool")
		}
	case recResult:
		if r.ToolCallID == "" {
			return errors.New("result record without a toolCallId")
		}
	default:
		return fmt.Errorf("unknown record type %q", r.Type)
	}
	return nil
}

// validSessionID reports whether id looks as a session id must to name a
// file: 1 to 128 of [A-Za-z0-9_-], no separator, no dot, so that no id
// reaches outside the sessions folder. (Written out rather than a
// regexp: `{1,128}` compiles to 128 copies, which every start of conch
// paid in its package initialisation.)
func validSessionID(id string) bool {
	if len(id) == 0 || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		switch c := id[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// errNoSession is returned when a session has no record.
var errNoSession = errors.New("no such session")

// store keeps sessions as JSON Lines files, one per session, under dir.
// Each record is one line written by a single write of the whole line and
// then synced, so a crash can cut only the last line; load skips a line
// that does not decode, and appending after such a cut first ends the cut
// line, so one bad line never spoils the next.
type store struct {
	dir string
	log *slog.Logger
}

func (s *store) path(id string) string { return filepath.Join(s.dir, id+".jsonl") }

// create makes the file of a new session and writes its first record.
func (s *store) create(id, cwd string) (*recorder, error) {
	if !validSessionID(id) {
		return nil, fmt.Errorf("session store: invalid session id %q", id)
	}
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return nil, fmt.Errorf("session store: %w", err)
	}
	p := s.path(id)
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("session store: create %s: %w", p, err)
	}
	r := &recorder{f: f, path: p}
	if err := r.write(record{Type: recSession, Version: recordVersion, Session: id, Cwd: cwd}); err != nil {
		f.Close()
		return nil, err
	}
	return r, nil
}

// load reads the records of session id, skipping (and logging) every line
// that is cut, garbled or unknown. It returns errNoSession when the
// session has no file.
func (s *store) load(id string) ([]record, error) {
	if !validSessionID(id) {
		return nil, errNoSession
	}
	p := s.path(id)
	f, size, err := openSessionFile(p, os.O_RDONLY)
	if errors.Is(err, os.ErrNotExist) {
		return nil, errNoSession
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if size > maxSessionFile {
		return nil, fmt.Errorf("session store: refusing %s: %d bytes, over the %d-byte limit of a session file", p, size, maxSessionFile)
	}
	var recs []record
	err = readLines(io.LimitReader(f, maxSessionFile), maxRecordLine, func(n int, line []byte, whole bool) bool {
		skip := func(reason string) {
			s.log.Warn("acp: skipping a session record", "session", id, "file", p, "line", n, "reason", reason)
		}
		if line == nil {
			skip(fmt.Sprintf("line longer than %d bytes", maxRecordLine))
			return true
		}
		if len(bytes.TrimSpace(line)) == 0 {
			return true
		}
		var r record
		if err := json.Unmarshal(line, &r); err != nil {
			if !whole {
				skip("truncated last line (the writer stopped mid-record): " + err.Error())
			} else {
				skip("not a JSON record: " + err.Error())
			}
			return true
		}
		if err := r.check(); err != nil {
			skip(err.Error())
			return true
		}
		recs = append(recs, r)
		return true
	})
	if err != nil {
		return recs, fmt.Errorf("session store: read %s: %w", p, err)
	}
	return recs, nil
}

// reopen opens the file of session id to append to it. If the file does
// not end in a newline (a cut last line), it first ends that line.
func (s *store) reopen(id string) (*recorder, error) {
	if !validSessionID(id) {
		return nil, errNoSession
	}
	p := s.path(id)
	f, size, err := openSessionFile(p, os.O_RDWR|os.O_APPEND)
	if err != nil {
		return nil, err
	}
	if size > 0 {
		last := make([]byte, 1)
		if _, err = f.ReadAt(last, size-1); err == nil && last[0] != '\n' {
			_, err = f.Write([]byte{'\n'})
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("session store: open %s: %w", p, err)
	}
	return &recorder{f: f, path: p}, nil
}

// openSessionFile opens the session file p with flag and returns it with
// its size. Only a regular file is a session file: a symbolic link is not
// followed (records would land in its target), and the open does not
// block (a FIFO would block it until a writer came); a FIFO, a device, a
// folder or a link in p's place is refused with an error naming it.
func openSessionFile(p string, flag int) (*os.File, int64, error) {
	fd, err := unix.Open(p, flag|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	switch {
	case errors.Is(err, unix.ELOOP):
		return nil, 0, fmt.Errorf("session store: refusing %s: it is %s, not a regular file", p, fileKind(unix.S_IFLNK))
	case errors.Is(err, unix.EISDIR): // opened for writing
		return nil, 0, fmt.Errorf("session store: refusing %s: it is %s, not a regular file", p, fileKind(unix.S_IFDIR))
	}
	if err != nil {
		return nil, 0, fmt.Errorf("session store: open %s: %w", p, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, 0, fmt.Errorf("session store: stat %s: %w", p, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, 0, fmt.Errorf("session store: refusing %s: it is %s, not a regular file", p, fileKind(uint32(st.Mode)))
	}
	// Non-blocking was for the open only: reads and writes of a regular
	// file do not block anyway, but the file must not be left in a mode
	// that only an open needed.
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, 0, fmt.Errorf("session store: open %s: %w", p, err)
	}
	return os.NewFile(uintptr(fd), p), st.Size, nil
}

// fileKind names the type of a file mode that is not a regular file.
func fileKind(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return "a directory"
	case unix.S_IFIFO:
		return "a FIFO"
	case unix.S_IFCHR:
		return "a character device"
	case unix.S_IFBLK:
		return "a block device"
	case unix.S_IFSOCK:
		return "a socket"
	case unix.S_IFLNK:
		return "a symbolic link"
	}
	return fmt.Sprintf("of type %#o", mode&unix.S_IFMT)
}

// readLines calls fn for each line of r (without its newline), numbered
// from 1, until fn returns false. whole is false for a last line that has
// no newline. A line longer than max is passed as nil.
func readLines(r io.Reader, max int, fn func(n int, line []byte, whole bool) bool) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var buf []byte
	size := 0 // of the line so far, newline included
	for n := 1; ; n++ {
		chunk, err := br.ReadSlice('\n')
		size += len(chunk)
		if size <= max+1 {
			buf = append(buf, chunk...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			n--
			continue
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		whole := err == nil
		if whole {
			buf = buf[:len(buf)-min(len(buf), 1)]
			size--
		}
		var line []byte
		if size <= max {
			line = buf
			if line == nil {
				line = []byte{}
			}
		}
		if (whole || size > 0) && !fn(n, line, whole) {
			return nil
		}
		if !whole {
			return nil
		}
		buf, size = buf[:0], 0
	}
}

// recorder appends records to one session file.
type recorder struct {
	mu   sync.Mutex
	f    *os.File
	path string
	// cut is set when a write failed part way (a full disk, a file size
	// limit): the file may end in a partial line, which the next record
	// must not be glued to.
	cut bool
}

// write appends r as one line, in one write, and syncs it. After a write
// that failed part way, the line is first ended, so that only the record
// whose write failed is lost.
func (rc *recorder) write(r record) error {
	if r.Time == "" {
		r.Time = time.Now().UTC().Format(time.RFC3339Nano)
	}
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("session store: encode: %w", err)
	}
	b = append(b, '\n')
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.f == nil {
		return fmt.Errorf("session store: %s is closed", rc.path)
	}
	if rc.cut {
		b = append([]byte{'\n'}, b...)
	}
	if n, err := rc.f.Write(b); err != nil {
		if n > 0 {
			rc.cut = true
		}
		return fmt.Errorf("session store: write %s: %w", rc.path, err)
	}
	rc.cut = false
	if err := rc.f.Sync(); err != nil {
		return fmt.Errorf("session store: sync %s: %w", rc.path, err)
	}
	return nil
}

func (rc *recorder) close() error {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.f == nil {
		return nil
	}
	err := rc.f.Close()
	rc.f = nil
	return err
}
