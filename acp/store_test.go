//go:build linux

package acp

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

type line struct {
	N     int
	Text  string
	Long  bool
	Whole bool
}

func lines(t *testing.T, in string, max int) []line {
	t.Helper()
	var out []line
	err := readLines(strings.NewReader(in), max, func(n int, l []byte, whole bool) bool {
		out = append(out, line{N: n, Text: string(l), Long: l == nil, Whole: whole})
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestReadLines(t *testing.T) {
	big := strings.Repeat("x", 100<<10) // longer than the reader's buffer
	for _, c := range []struct {
		name string
		in   string
		max  int
		want []line
	}{
		{"empty", "", 10, nil},
		{"whole", "a\nbb\n", 10, []line{{1, "a", false, true}, {2, "bb", false, true}}},
		{"cut last line", "a\nbb", 10, []line{{1, "a", false, true}, {2, "bb", false, false}}},
		{"blank lines", "\n\na\n", 10, []line{{1, "", false, true}, {2, "", false, true}, {3, "a", false, true}}},
		{"too long", "a\n0123456789X\nb\n", 10, []line{{1, "a", false, true}, {2, "", true, true}, {3, "b", false, true}}},
		{"exactly max", "0123456789\n", 10, []line{{1, "0123456789", false, true}}},
		{"too long cut", "a\n0123456789X", 10, []line{{1, "a", false, true}, {2, "", true, false}}},
		{"longer than the buffer", big + "\nb\n", len(big), []line{{1, big, false, true}, {2, "b", false, true}}},
		{"longer than the buffer and max", big + "\nb\n", 10, []line{{1, "", true, true}, {2, "b", false, true}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if d := cmp.Diff(c.want, lines(t, c.in, c.max)); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

func newTestStore(t *testing.T) (*store, *bytes.Buffer) {
	var logs bytes.Buffer
	return &store{dir: filepath.Join(t.TempDir(), "sessions"), log: slog.New(slog.NewTextHandler(&logs, nil))}, &logs
}

func TestStoreRoundTrip(t *testing.T) {
	s, logs := newTestStore(t)
	rec, err := s.create("sess_a", "/w")
	if err != nil {
		t.Fatal(err)
	}
	want := []record{
		{Type: recPrompt, Text: "echo hi"},
		{Type: recCall, ToolCallID: "call-1", Tool: "bash", Args: []byte(`{"command":"echo hi"}`), Cwd: "/w"},
		{Type: recResult, ToolCallID: "call-1", Texts: []string{"hi\n\x00\u2028"}},
		{Type: recResult, ToolCallID: "call-2"},
		{Type: recMessage, Text: "notice"},
	}
	for _, r := range want {
		if err := rec.write(r); err != nil {
			t.Fatal(err)
		}
	}
	rec.close()
	if err := rec.write(want[0]); err == nil {
		t.Error("write after close succeeded")
	}
	fi, err := os.Stat(s.path("sess_a"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("session file mode %v, %v", fi.Mode(), err)
	}
	if di, _ := os.Stat(s.dir); di.Mode().Perm() != 0o700 {
		t.Errorf("sessions dir mode %v", di.Mode())
	}
	got, err := s.load("sess_a")
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Type != recSession || got[0].Session != "sess_a" || got[0].Cwd != "/w" || got[0].Version != recordVersion {
		t.Errorf("header %+v", got[0])
	}
	for i := range got {
		got[i].Time = ""
	}
	if d := cmp.Diff(want, got[1:]); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if logs.Len() != 0 {
		t.Errorf("clean load logged: %s", logs.String())
	}
	if _, err := s.create("sess_a", "/w"); err == nil {
		t.Error("create overwrote an existing session")
	}
}

func TestStoreRefusesPaths(t *testing.T) {
	s, _ := newTestStore(t)
	for _, id := range []string{"", "../x", "a/b", ".hidden", "a.b", strings.Repeat("a", 129)} {
		if _, err := s.load(id); err != errNoSession {
			t.Errorf("load(%q) = %v, want errNoSession", id, err)
		}
		if _, err := s.create(id, "/"); err == nil {
			t.Errorf("create(%q) succeeded", id)
		}
	}
}

// TestStoreCutLine: a file cut mid-record loads without that record; the
// next append starts a new line, so the new record loads too.
func TestStoreCutLine(t *testing.T) {
	s, logs := newTestStore(t)
	rec, err := s.create("sess_c", "/w")
	if err != nil {
		t.Fatal(err)
	}
	rec.write(record{Type: recPrompt, Text: "one"})
	rec.close()
	f, _ := os.OpenFile(s.path("sess_c"), os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString(`{"type":"prompt","text":"tw`)
	f.Close()

	recs, err := s.load("sess_c")
	if err != nil || len(recs) != 2 {
		t.Fatalf("load: %d records, %v", len(recs), err)
	}
	if !strings.Contains(logs.String(), "truncated last line") {
		t.Errorf("cut line not logged: %s", logs.String())
	}
	rec, err = s.reopen("sess_c")
	if err != nil {
		t.Fatal(err)
	}
	rec.write(record{Type: recPrompt, Text: "three"})
	rec.close()
	recs, _ = s.load("sess_c")
	if len(recs) != 3 || recs[2].Text != "three" {
		t.Errorf("after reopen: %+v", recs)
	}
	// Reopening a file that ends whole adds nothing.
	before, _ := os.ReadFile(s.path("sess_c"))
	rec, _ = s.reopen("sess_c")
	rec.close()
	after, _ := os.ReadFile(s.path("sess_c"))
	if !bytes.Equal(before, after) {
		t.Errorf("reopen changed a whole file")
	}
}

func TestStoreSkipsBadRecords(t *testing.T) {
	s, logs := newTestStore(t)
	os.MkdirAll(s.dir, 0o700)
	content := strings.Join([]string{
		`{"type":"session","session":"sess_b","cwd":"/w","version":1}`,
		`{"type":"prompt","text":"ok"}`,
		`not json`,
		`{"type":"teleport"}`,
		`{"type":"call","tool":"bash"}`,
		`{"type":"result","texts":["x"]}`,
		`[]`,
		``,
		`{"type":"message","text":"still here"}`,
	}, "\n") + "\n"
	os.WriteFile(s.path("sess_b"), []byte(content), 0o600)
	recs, err := s.load("sess_b")
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, r := range recs {
		types = append(types, r.Type)
	}
	if d := cmp.Diff([]string{"session", "prompt", "message"}, types); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if n := strings.Count(logs.String(), "skipping a session record"); n != 5 {
		t.Errorf("%d skipped lines logged, want 5:\n%s", n, logs.String())
	}
}

// TestRecorderWholeLines: concurrent writers never interleave lines.
func TestRecorderWholeLines(t *testing.T) {
	s, logs := newTestStore(t)
	rec, err := s.create("sess_w", "/w")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 20; j++ {
				rec.write(record{Type: recMessage, Text: strings.Repeat("m", 70000)})
			}
		}()
	}
	wg.Wait()
	rec.close()
	recs, _ := s.load("sess_w")
	if len(recs) != 161 || logs.Len() != 0 {
		t.Errorf("%d records, logs: %s", len(recs), logs.String())
	}
}

// FuzzLoad: no file content makes a load panic or fail; every record it
// returns is usable.
func FuzzLoad(f *testing.F) {
	f.Add([]byte(`{"type":"session","session":"s","cwd":"/"}` + "\n" + `{"type":"prompt","text":"x"}`))
	f.Add([]byte("\x00\xff\n{\n}\n"))
	f.Add([]byte(`{"type":"result","toolCallId":"c","texts":["a"]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s := &store{dir: t.TempDir(), log: slog.New(slog.NewTextHandler(io.Discard, nil))}
		os.WriteFile(s.path("sess_f"), data, 0o600)
		recs, err := s.load("sess_f")
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if err := r.check(); err != nil {
				t.Fatalf("load returned an unusable record %+v: %v", r, err)
			}
		}
	})
}

// TestRecorderAfterAPartialWrite: a write that fails part way (here: a
// file size limit, as a full disk would) loses its own record only; the
// next record starts a new line and loads.
func TestRecorderAfterAPartialWrite(t *testing.T) {
	s, logs := newTestStore(t)
	rec, err := s.create("sess_p", "/w")
	if err != nil {
		t.Fatal(err)
	}
	if err := rec.write(record{Type: recPrompt, Text: "one"}); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(s.path("sess_p"))
	if err != nil {
		t.Fatal(err)
	}
	// The limit applies to the whole test process (Go ignores SIGXFSZ, so
	// the write fails with EFBIG); nothing else writes files meanwhile.
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	lim := old
	lim.Cur = uint64(fi.Size() + 20)
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		t.Skipf("cannot limit the file size: %v", err)
	}
	werr := rec.write(record{Type: recPrompt, Text: strings.Repeat("x", 100)})
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	if werr == nil {
		t.Fatal("the write past the limit succeeded")
	}
	if after, _ := os.Stat(s.path("sess_p")); after.Size() == fi.Size() {
		t.Fatal("the failed write wrote nothing: not a partial write")
	}
	if err := rec.write(record{Type: recPrompt, Text: "three"}); err != nil {
		t.Fatal(err)
	}
	rec.close()
	recs, err := s.load("sess_p")
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, r := range recs[1:] {
		texts = append(texts, r.Text)
	}
	if d := cmp.Diff([]string{"one", "three"}, texts); d != "" {
		t.Errorf("records after a partial write (-want +got):\n%s\nlogs: %s", d, logs.String())
	}
	if !strings.Contains(logs.String(), "skipping a session record") {
		t.Errorf("the partial line was not logged: %s", logs.String())
	}
}

// TestStoreRefusesPlantedFiles: only a regular file is a session file.
// A link is not followed (its target stays untouched), and a FIFO, a
// device, a folder or a file over the load limit is refused at once with
// an error naming it, for reading and for appending alike.
func TestStoreRefusesPlantedFiles(t *testing.T) {
	s, _ := newTestStore(t)
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "target.jsonl")
	const session = `{"type":"session","session":"sess_link","cwd":"/w","version":1}` + "\n"
	if err := os.WriteFile(outside, []byte(session[:len(session)-1]), 0o600); err != nil { // no final newline: a reopen would add one
		t.Fatal(err)
	}
	plant := map[string]func(p string) error{
		"sess_link": func(p string) error { return os.Symlink(outside, p) },
		"sess_zero": func(p string) error { return os.Symlink("/dev/zero", p) },
		"sess_fifo": func(p string) error { return syscall.Mkfifo(p, 0o600) },
		"sess_dir":  func(p string) error { return os.Mkdir(p, 0o700) },
		"sess_huge": func(p string) error { return os.WriteFile(p, nil, 0o600) },
	}
	want := map[string]string{
		"sess_link": "it is a symbolic link, not a regular file",
		"sess_zero": "it is a symbolic link, not a regular file",
		"sess_fifo": "it is a FIFO, not a regular file",
		"sess_dir":  "it is a directory, not a regular file",
		"sess_huge": "over the 134217728-byte limit of a session file",
	}
	for id, f := range plant {
		if err := f(s.path(id)); err != nil {
			t.Fatal(err)
		}
	}
	// Sparse: no disk is spent on it.
	if err := os.Truncate(s.path("sess_huge"), maxSessionFile+1); err != nil {
		t.Fatal(err)
	}
	// A character device of its own (the numbers of /dev/zero), where
	// this user may make one.
	if err := syscall.Mknod(s.path("sess_dev"), syscall.S_IFCHR|0o600, 1<<8|5); err == nil {
		want["sess_dev"] = "it is a character device, not a regular file"
	} else {
		t.Logf("no device node (%v): that case is not tried", err)
	}
	for id, msg := range want {
		t.Run(id, func(t *testing.T) {
			done := make(chan error, 1)
			go func() {
				recs, err := s.load(id)
				if err == nil {
					err = fmt.Errorf("loaded %d records", len(recs))
				}
				done <- err
			}()
			select {
			case err := <-done:
				if !strings.Contains(err.Error(), s.path(id)) || !strings.Contains(err.Error(), msg) {
					t.Errorf("load: %v, want an error naming %s with %q", err, s.path(id), msg)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("load blocked")
			}
			if id == "sess_huge" {
				return // appending to a long file is fine
			}
			rec, err := s.reopen(id)
			if err == nil {
				rec.close()
			}
			if err == nil || !strings.Contains(err.Error(), msg) {
				t.Errorf("reopen: %v, want %q", err, msg)
			}
		})
	}
	if got, _ := os.ReadFile(outside); string(got) != session[:len(session)-1] {
		t.Errorf("the link's target changed: %q", got)
	}
}
