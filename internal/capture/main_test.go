package capture

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if h := os.Getenv(helperEnv); h != "" {
		os.Exit(runHelper(h))
	}
	goleak.VerifyTestMain(m)
}

// helperEnv makes the test binary run a helper instead of the tests, for
// work that changes process-wide state (see runHelper).
const helperEnv = "CAPTURE_TEST_HELPER"

// tb is what both *testing.T and *rapid.T offer.
type tb interface {
	Helper()
	Fatalf(format string, args ...any)
}

// newTestDir returns a Dir under a fresh temporary directory, closed when
// the test ends.
func newTestDir(t testing.TB, budget int64) *Dir {
	t.Helper()
	d := NewDir(t.TempDir(), budget)
	t.Cleanup(func() { d.Close() })
	return d
}

// spillFiles lists the names of the files in d's directory (nil when the
// directory does not exist).
func spillFiles(t tb, d *Dir) []string {
	t.Helper()
	if d.Path() == "" {
		return nil
	}
	ents, err := os.ReadDir(d.Path())
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		t.Fatalf("read spill dir: %v", err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// diskUsage sums the sizes of the files in d's directory.
func diskUsage(t tb, d *Dir) int64 {
	t.Helper()
	var n int64
	for _, name := range spillFiles(t, d) {
		fi, err := os.Lstat(filepath.Join(d.Path(), name))
		if err != nil {
			t.Fatalf("stat spill file: %v", err)
		}
		n += fi.Size()
	}
	return n
}

func mustRead(t tb, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return b
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil || !os.IsNotExist(err)
}

func mode(t tb, path string) fs.FileMode {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatalf("stat %s: %v", path, err)
	}
	return fi.Mode().Perm()
}

// pattern returns n deterministic bytes that do not repeat with a short
// period, so a misplaced chunk shows.
func pattern(n int) []byte {
	b := make([]byte, n)
	x := uint32(2463534242)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
