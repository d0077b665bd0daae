package sandbox

import (
	"bytes"
	"crypto/sha256"
	"encoding/gob"
	"encoding/hex"
	"os"
	"path/filepath"
	"time"
)

// The repository search's record (Policy.SearchCache): what the search
// read of each directory, kept so that the next start of a session in
// the same tree checks each directory with one lstat instead of reading
// it (docs/sandbox.md#costs). A directory's entries change only with its
// change time (ctime), which no user can set, so a directory whose
// device, inode and ctime are those recorded holds the entries recorded:
// its repository (a .git entry) and its subdirectories. A directory
// changed within searchRacy of being read is not recorded: the kernel's
// timestamps are coarse, and a change in the same tick as the read would
// leave its ctime as recorded.
var searchRacy = time.Second // a variable for the tests

// searchEntry is what the search read of one directory.
type searchEntry struct {
	Dev, Ino uint64
	Ctime    int64 // ns
	Git      bool
	Subdirs  []string // names, in the order ReadDir gives them
}

// searchRecord is the record of one root's search.
type searchRecord struct {
	Dirs map[string]searchEntry
}

// searcher reads directories for findRepos, from a record where it
// still holds.
type searcher struct {
	file     string // "" without a record
	old, new map[string]searchEntry
	changed  bool
	reads    int // directories read, not taken from the record
}

// newSearcher returns the searcher of root, with its record in dir ("":
// none).
func newSearcher(dir, root string) *searcher {
	s := &searcher{new: make(map[string]searchEntry)}
	if dir == "" {
		return s
	}
	sum := sha256.Sum256([]byte(root))
	s.file = filepath.Join(dir, hex.EncodeToString(sum[:16]))
	if b, err := os.ReadFile(s.file); err == nil {
		var rec searchRecord
		if gob.NewDecoder(bytes.NewReader(b)).Decode(&rec) == nil {
			s.old = rec.Dirs
		}
	}
	return s
}

// read returns whether dir holds a .git entry and its subdirectories to
// search (not .git, not node_modules, no symlink), or ok false if dir
// cannot be read.
func (s *searcher) read(dir string) (git bool, subdirs []string, ok bool) {
	id, idOK := dirID(dir)
	if e, hit := s.old[dir]; hit && idOK && e.Dev == id.Dev && e.Ino == id.Ino && e.Ctime == id.Ctime {
		s.new[dir] = e
		return e.Git, e.Subdirs, true
	}
	s.changed = true
	s.reads++
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false, nil, false
	}
	for _, e := range ents {
		switch {
		case e.Name() == ".git":
			git = true
		case e.IsDir() && e.Name() != "node_modules":
			// Type from ReadDir: a symlink is not followed.
			subdirs = append(subdirs, e.Name())
		}
	}
	if idOK && time.Since(time.Unix(0, id.Ctime)) > searchRacy {
		id.Git, id.Subdirs = git, subdirs
		s.new[dir] = id
	}
	return git, subdirs, true
}

// save writes the record of this search when it differs from the one
// read by more than an eighth of its directories: rewriting the whole
// record costs more than reading a few directories again at the next
// start (a tree under /tmp changes a little all the time). A failure
// only costs the next start its speed.
func (s *searcher) save() {
	if s.file == "" || (!s.changed && len(s.new) == len(s.old)) || (s.old != nil && s.reads*8 < len(s.new)) {
		return
	}
	var b bytes.Buffer
	if gob.NewEncoder(&b).Encode(searchRecord{Dirs: s.new}) != nil {
		return
	}
	dir := filepath.Dir(s.file)
	if os.MkdirAll(dir, 0o700) != nil {
		return
	}
	f, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return
	}
	_, err = f.Write(b.Bytes())
	if cerr := f.Close(); err == nil && cerr == nil {
		if os.Rename(f.Name(), s.file) == nil {
			return
		}
	}
	os.Remove(f.Name())
}
