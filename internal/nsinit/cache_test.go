//go:build linux

package nsinit_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	seccomp "github.com/elastic/go-seccomp-bpf"

	"github.com/conch-dev/conch/internal/nsinit"
	"github.com/conch-dev/conch/internal/sandbox"
	"github.com/conch-dev/conch/internal/testutil"
)

// cacheWant is the cache layer a TestCacheLayer run must find: "overlay",
// or "copy" in the run of TestCacheLayerFallback.
const cacheWantEnv = "NSINIT_TEST_CACHE_WANT"

// TestCacheLayer: in workspace-write mode a command reads the user's
// cache, and what it writes there (a patched entry, a new one, a deleted
// one) goes to conch's layer, never to the user's directory, which keeps
// every byte; the next session sees what the first wrote; the layer's
// own directory is out of sight. TestCacheLayerFallback runs it again
// where overlayfs cannot be mounted.
func TestCacheLayer(t *testing.T) {
	testCacheLayer(t, "/var/tmp")
}

// TestCacheLayerJournaled is TestCacheLayer with the home and the layer
// on an ext4 with a journal (a loop device), where the overlays are
// volatile (sandbox.Journalless): this project's machine's own disk has
// none.
func TestCacheLayerJournaled(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root: mounts an ext4 file system on a loop device")
	}
	if os.Getenv(cacheWantEnv) != "" {
		t.Skip("the fallback runs TestCacheLayer")
	}
	mnt := testutil.MountExt4(t, 64<<20)
	if sandbox.Journalless(mnt) {
		t.Fatal("a fresh ext4 has no journal")
	}
	testCacheLayer(t, mnt)
}

func testCacheLayer(t *testing.T, parent string) {
	want := sandbox.CacheOverlay
	if os.Getenv(cacheWantEnv) == "copy" {
		want = sandbox.CacheCopy
	}
	marker := clean(t)
	h := newSandboxHostIn(t, marker, parent)
	cache := filepath.Join(h.home, ".cache")
	entry := filepath.Join(cache, "go-build", "ab", "abcd-d")
	if err := os.MkdirAll(filepath.Dir(entry), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(entry, []byte("real\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cache, "doomed"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(cache, "pip", "http"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cache, "pip", "http", "old"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := testutil.TreeSum(t, cache)
	// A cache directory empty here and in the layer (a tool that has not
	// written it yet) gets the session's upper directory bound alone, no
	// overlay (sandbox.MountCaches), until the layer holds something.
	npm := filepath.Join(h.home, ".npm")
	if err := os.Mkdir(npm, 0o755); err != nil {
		t.Fatal(err)
	}
	p := h.policy(sandbox.NetworkOn)
	p.Caches = append(p.Caches, npm)
	start := func() *nsinit.Init {
		t.Helper()
		plan, err := p.Resolve()
		if err != nil {
			t.Fatal(err)
		}
		o := initOptions()
		o.Sandbox = plan
		in, err := nsinit.Start(o)
		if err != nil {
			t.Fatalf("Start: %v", err)
		}
		t.Cleanup(func() { in.Close() })
		if got := in.CacheLayer(); !strings.HasPrefix(got, want) {
			t.Fatalf("cache layer %q, want %s", got, want)
		}
		return in
	}
	in := start()
	script := `cat ~/.cache/go-build/ab/abcd-d 2>/dev/null; mkdir -p ~/.cache/go-build/ab ~/.cache/npm-ish/x && echo evil > ~/.cache/go-build/ab/abcd-d && echo new > ~/.cache/npm-ish/x/y && rm -f ~/.cache/doomed && cat ~/.cache/go-build/ab/abcd-d ~/.cache/npm-ish/x/y; ls -A ` + h.state + `; echo listed; mkdir -p ~/.cache/pip && echo s1 > ~/.cache/pip/s1; mkdir ~/.npm/_cacache && echo n > ~/.npm/_cacache/n && cat ~/.npm/_cacache/n; awk '$5 == "` + npm + `" { for (i = 7; $i != "-"; i++); print $(i+1) }' /proc/self/mountinfo`
	code, stdout, stderr := h.runIn(t, in, script)
	wantOut := "real\nevil\nnew\nlisted\nn\n"
	if want == sandbox.CacheCopy {
		// conch's copy alone: the user's entry is not there to read.
		wantOut = "evil\nnew\nlisted\nn\n"
	}
	// ~/.npm's mount: the upper directory's file system, not overlayfs.
	wantOut += fsType(t, h.state) + "\n"
	if code != 0 || stdout != wantOut {
		t.Errorf("in the first session: status %d, stdout %q, want %q (stderr %q)", code, stdout, wantOut, stderr)
	}
	if got := testutil.TreeSum(t, cache); got != before {
		t.Error("the user's cache changed while the session ran")
	}
	if err := in.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if got := testutil.TreeSum(t, cache); got != before {
		t.Error("the user's cache changed when the session ended")
	}
	layer := func(sub string) []string {
		t.Helper()
		entries, _ := os.ReadDir(filepath.Join(h.state, "cache-layer", sub))
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		return names
	}
	spares := func(want int) {
		t.Helper()
		if got := layer("spare"); len(got) != want {
			t.Errorf("spare sessions in the layer: %v, want %d", got, want)
		}
	}
	if want == sandbox.CacheOverlay {
		// The ended session's emptied directories wait for the next.
		spares(1)
	}
	// The next session starts from what the first left, in the first's
	// directories, and writes over them in turn.
	in = start()
	if want == sandbox.CacheOverlay {
		spares(0)
	}
	// The user's pip/http under the session's pip/s1, then the whole
	// removed and made again: an opaque directory, which hides the
	// user's in the next sessions too.
	pipListed := "http\ns1\n"
	if want == sandbox.CacheCopy {
		pipListed = "s1\n"
	}
	if code, stdout, stderr := h.runIn(t, in, `cat ~/.cache/go-build/ab/abcd-d ~/.cache/npm-ish/x/y; test -e ~/.cache/doomed || echo gone; echo again > ~/.cache/npm-ish/x/y && rm ~/.cache/go-build/ab/abcd-d && mkdir -p ~/.cache/go-build/cd && echo more > ~/.cache/go-build/cd/e && cat ~/.npm/_cacache/n && rm ~/.npm/_cacache/n && ls ~/.cache/pip && rm -rf ~/.cache/pip && mkdir ~/.cache/pip && echo z > ~/.cache/pip/z`); code != 0 || stdout != "evil\nnew\ngone\nn\n"+pipListed {
		t.Errorf("in the next session: status %d, stdout %q (stderr %q)", code, stdout, stderr)
	}
	in.Close()
	in = start()
	if code, stdout, stderr := h.runIn(t, in, `cat ~/.cache/npm-ish/x/y ~/.cache/go-build/cd/e; test -e ~/.cache/go-build/ab/abcd-d || echo gone; ls -A ~/.npm/_cacache; echo listed; ls -A ~/.cache/pip`); code != 0 || stdout != "again\nmore\ngone\nlisted\nz\n" {
		t.Errorf("in the third session: status %d, stdout %q (stderr %q)", code, stdout, stderr)
	}
	if want == sandbox.CacheOverlay {
		// Volatile, but on an ext4 without a journal (this project's
		// machine: sandbox.Journalless): its unmount at the session's
		// end syncs nothing, and the third session mounted the work
		// directories two volatile mounts had used (a spare's, cleared
		// by cachelayer.Begin).
		mi, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", in.Pid()))
		if err != nil {
			t.Fatal(err)
		}
		var opts string
		for _, l := range strings.Split(string(mi), "\n") {
			if f := strings.Fields(l); len(f) > 4 && f[4] == cache {
				opts = f[len(f)-1]
			}
		}
		// "fsync=volatile" since Linux 6.6, "volatile" before.
		o := "," + opts + ","
		volatile := strings.Contains(o, ",volatile,") || strings.Contains(o, ",fsync=volatile,")
		if want := !sandbox.Journalless(filepath.Join(h.state, "cache-layer")); volatile != want {
			t.Errorf("the overlay on %s has options %q: volatile %v, want %v", cache, opts, volatile, want)
		}
	}
	in.Close()
	if got := layer("sessions"); len(got) != 0 {
		t.Errorf("sessions left in the layer: %v", got)
	}
	if want == sandbox.CacheOverlay {
		spares(1)
	}
	if got := testutil.TreeSum(t, cache); got != before {
		t.Error("the user's cache changed")
	}
	if ents, err := os.ReadDir(npm); err != nil || len(ents) != 0 {
		t.Errorf("the user's empty cache directory holds %v (%v)", ents, err)
	}
}

// fsType is the type of the file system that holds dir, as mountinfo
// names it.
func fsType(t *testing.T, dir string) string {
	t.Helper()
	out, err := exec.Command("findmnt", "-no", "FSTYPE", "-T", dir).Output()
	if err != nil {
		t.Fatalf("findmnt: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// noOverlayHelper runs TestCacheLayer in a process whose kernel seems to
// lack the new mount API, so overlayfs (mounted through fsopen) cannot
// be: a seccomp filter makes fsopen fail with ENOSYS.
func noOverlayHelper(m interface{ Run() int }) int {
	hide := seccomp.Filter{
		NoNewPrivs: true,
		Flag:       seccomp.FilterFlagTSync,
		Policy: seccomp.Policy{
			DefaultAction: seccomp.ActionAllow,
			Syscalls: []seccomp.SyscallGroup{{
				Action: seccomp.ActionErrno | seccomp.Action(syscall.ENOSYS),
				Names:  []string{"fsopen"},
			}},
		},
	}
	if err := seccomp.LoadFilter(hide); err != nil {
		fmt.Println("set-up:", err)
		return 1
	}
	return m.Run()
}

// TestCacheLayerFallback: where overlayfs cannot be mounted, commands
// write conch's own copy of the caches (bound over the user's
// directories): TestCacheLayer passes with that copy.
func TestCacheLayerFallback(t *testing.T) {
	marker := clean(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^TestCacheLayer$", "-test.v", "-test.count=1")
	cmd.Env = append(testutil.Env(marker), helperEnv+"=nooverlay", cacheWantEnv+"=copy", "HOME="+os.Getenv("HOME"), "PATH="+os.Getenv("PATH"), "TMPDIR="+os.Getenv("TMPDIR"), noRaceSleep)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestCacheLayer ") {
		t.Errorf("TestCacheLayer without overlayfs: %v\n%s", err, out)
	}
}
