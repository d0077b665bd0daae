//go:build linux

package term_test

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/term"
	"github.com/conch-dev/conch/internal/testutil"
)

// start runs argv on a terminal with the test's marker in its
// environment, and checks at the end that the terminal is released and
// nothing it started is left (TestMain checks goroutines,
// TestNoDescriptorLeft file descriptors).
func start(t *testing.T, argv []string, env ...string) *term.Term {
	t.Helper()
	marker := testutil.Marker(t)
	tm, err := term.Start(spawn(argv, append(testutil.Env(marker), env...)), &term.Options{Grace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		tm.Close()
		testutil.AssertNoProcesses(t, marker)
	})
	return tm
}

func helper(t *testing.T, name string, env ...string) *term.Term {
	t.Helper()
	return start(t, []string{os.Args[0]}, append(env, "TERMTEST_HELPER="+name)...)
}

// input is Input that must succeed.
func input(t *testing.T, tm *term.Term, text string, keys ...string) string {
	t.Helper()
	out, err := tm.Input(text, keys, 5*time.Second)
	if err != nil {
		t.Fatalf("Input(%q, %q): %v", text, keys, err)
	}
	return out
}

// waitScreen waits until the screen shows want: a real program may take
// longer than the quiet period to start on a loaded machine.
func waitScreen(t *testing.T, tm *term.Term, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(tm.Screen(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("the screen never showed %q:\n%s", want, tm.Screen())
		}
		tm.WaitQuiet(100 * time.Millisecond)
	}
}

// ended waits for the program to end and returns its exit code.
func ended(t *testing.T, tm *term.Term) int {
	t.Helper()
	select {
	case <-tm.Done():
	case <-time.After(10 * time.Second):
		t.Fatalf("the program did not end; screen:\n%s", tm.Screen())
	}
	code, sig := tm.Exit()
	if code == nil {
		t.Fatalf("the program was killed by %s", sig)
	}
	return *code
}

func TestREPL(t *testing.T) {
	t.Parallel()
	tm := helper(t, "repl")
	waitScreen(t, tm, ">")
	if got := tm.Read(); got != "> " {
		t.Errorf("first read %q, want the prompt", got)
	}
	if got := tm.Read(); got != "" {
		t.Errorf("read with nothing new: %q", got)
	}
	if got := input(t, tm, "hello", "Enter"); got != "> hello\n= HELLO\n> " {
		t.Errorf("after hello: %q", got)
	}
	if got := input(t, tm, "two\n"); got != "> two\n= TWO\n> " {
		t.Errorf("after two: %q", got)
	}
	if got := input(t, tm, "", "C-d"); got != "> bye\n" {
		t.Errorf("after C-d: %q", got)
	}
	if code := ended(t, tm); code != 0 {
		t.Errorf("exit code %d", code)
	}
	if _, err := tm.Input("more", []string{"Enter"}, time.Second); !errors.Is(err, term.ErrEnded) {
		t.Errorf("input to an ended program: %v", err)
	}
}

func TestHiddenPassword(t *testing.T) {
	t.Parallel()
	tm := helper(t, "password")
	waitScreen(t, tm, "Password:")
	if got := tm.Read(); got != "Password: " {
		t.Errorf("prompt %q", got)
	}
	input(t, tm, "s3cret", "Enter")
	ended(t, tm)
	if got := tm.Screen(); got != "Password:\ngot 6 characters" {
		t.Errorf("screen %q: the password must not be echoed", got)
	}
}

func TestFullScreen(t *testing.T) {
	t.Parallel()
	tm := helper(t, "fullscreen")
	waitScreen(t, tm, "status: ready")
	want := "TITLE" + strings.Repeat("\n", 19) + strings.Repeat(" ", 49) + "center" + strings.Repeat("\n", 20) + "status: ready"
	if got := tm.Read(); got != want {
		t.Errorf("screen:\n%s\nwant:\n%s", got, want)
	}
	if !tm.AltScreen() {
		t.Error("not on the alternate screen")
	}
	if got := input(t, tm, "", "Enter"); got != "left full screen\n" {
		t.Errorf("after leaving the full screen: %q", got)
	}
	ended(t, tm)
}

// TestCursorQuery: a program that asks where the cursor is gets its answer
// (the emulator's reply is pumped back), rather than hanging.
func TestCursorQuery(t *testing.T) {
	t.Parallel()
	tm := helper(t, "cpr")
	if code := ended(t, tm); code != 0 {
		t.Errorf("exit code %d", code)
	}
	if got := tm.Read(); got != "abc\ncursor at 1;4R\n" {
		t.Errorf("read %q", got)
	}
}

func TestProgressCollapsed(t *testing.T) {
	t.Parallel()
	tm := helper(t, "progress")
	ended(t, tm)
	if got := tm.Read(); got != "progress 100%\ndone\n" {
		t.Errorf("read %q", got)
	}
}

func TestKeysEncoded(t *testing.T) {
	t.Parallel()
	tm := helper(t, "keys")
	waitScreen(t, tm, "ready")
	tm.Read()
	for _, c := range []struct {
		key, hex string
	}{
		{"Enter", "0d"}, {"Tab", "09"}, {"Escape", "1b"}, {"Backspace", "7f"},
		{"Up", "1b5b41"}, {"Down", "1b5b42"}, {"Right", "1b5b43"}, {"Left", "1b5b44"},
		{"Home", "1b5b48"}, {"End", "1b5b46"}, {"PageUp", "1b5b357e"}, {"PageDown", "1b5b367e"},
		{"C-a", "01"}, {"C-c", "03"}, {"C-z", "1a"}, {"F1", "1b4f50"}, {"F12", "1b5b32347e"},
	} {
		if got := input(t, tm, "", c.key); got != c.hex+"\n" {
			t.Errorf("%s sent %q, want %s", c.key, got, c.hex)
		}
	}
	input(t, tm, "q")
	ended(t, tm)
}

func TestUnknownKey(t *testing.T) {
	t.Parallel()
	tm := helper(t, "repl")
	_, err := tm.Input("not sent", []string{"Enter", "Ctrl-C"}, time.Second)
	const want = `unknown key "Ctrl-C"; keys are Enter, Tab, Escape, Backspace, Up, Down, Left, Right, Home, End, PageUp, PageDown, C-a … C-z, F1 … F12`
	var uk *term.UnknownKeyError
	if !errors.As(err, &uk) || err.Error() != want {
		t.Fatalf("error %v, want %s", err, want)
	}
	waitScreen(t, tm, ">")
	tm.WaitQuiet(500 * time.Millisecond)
	if got := tm.Read(); got != "> " {
		t.Errorf("something was sent before the keys were checked: %q", got)
	}
}

// TestBash drives an interactive bash: a command, C-c stopping the
// foreground job but not the shell, and C-d ending it.
func TestBash(t *testing.T) {
	t.Parallel()
	tm := start(t, []string{"bash", "--norc", "--noprofile", "-i"}, "PS1=$ ", "HISTFILE=/dev/null")
	waitScreen(t, tm, "$")
	if got := tm.Read(); got != "$ " {
		t.Errorf("prompt %q", got)
	}
	if got := input(t, tm, "echo $((6*7))", "Enter"); got != "$ echo $((6*7))\n42\n$ " {
		t.Errorf("echo: %q", got)
	}
	out, err := tm.Input("sleep 30", []string{"Enter"}, 500*time.Millisecond)
	if err != nil || out != "$ sleep 30\n" {
		t.Errorf("sleep: %q, %v", out, err)
	}
	start := time.Now()
	if got := input(t, tm, "", "C-c"); got != "^C\n$ " {
		t.Errorf("C-c: %q", got)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("C-c took %v", d)
	}
	if got := input(t, tm, "echo alive", "Enter"); got != "$ echo alive\nalive\n$ " {
		t.Errorf("after C-c: %q", got)
	}
	// A job that ignores hang-ups, in a group of its own, outlives the
	// shell; Close (the cleanup of start) must still end it.
	input(t, tm, "nohup sleep 300 >/dev/null 2>&1 &", "Enter")
	input(t, tm, "", "C-d")
	if code := ended(t, tm); code != 0 {
		t.Errorf("bash exit code %d", code)
	}
}

func TestPython(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	tm := start(t, []string{testutil.Python3(t), "-q", "-i"}, "PYTHON_BASIC_REPL=1", "PYTHONSTARTUP=")
	waitScreen(t, tm, ">>>")
	if got := tm.Read(); got != ">>> " {
		t.Errorf("prompt %q", got)
	}
	if got := input(t, tm, "6*7", "Enter"); got != ">>> 6*7\n42\n>>> " {
		t.Errorf("6*7: %q", got)
	}
	input(t, tm, "", "C-d")
	if code := ended(t, tm); code != 0 {
		t.Errorf("python exit code %d", code)
	}
}

// countingWriter counts the bytes written to it.
type countingWriter struct{ n atomic.Int64 }

func (w *countingWriter) Write(p []byte) (int, error) {
	w.n.Add(int64(len(p)))
	return len(p), nil
}

// TestFloodMemoryBounded: 10 MB through the terminal: every byte reaches
// Raw, the heap stays small, and a read shows a bounded view.
func TestFloodMemoryBounded(t *testing.T) {
	// The emulator under -race takes 10 MiB at 25 to 120 KiB/s on a
	// loaded 2-core machine (83 to 415 s): the default floods 2 MiB, a
	// soak (testutil.SoakEnv) 10 MiB, against the same bound.
	size := int64(testutil.SoakSize(1<<20, 2<<20, 10<<20))
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	var raw countingWriter
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	tm, err := term.Start(spawn([]string{os.Args[0]}, append(testutil.Env(marker), "TERMTEST_HELPER=flood", "TERMTEST_FLOOD_BYTES="+strconv.FormatInt(size, 10))),
		&term.Options{Raw: &raw})
	if err != nil {
		t.Fatal(err)
	}
	defer tm.Close()
	var peak uint64
	for done := false; !done; {
		select {
		case <-tm.Done():
			done = true
		case <-time.After(50 * time.Millisecond):
		}
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		peak = max(peak, m.HeapInuse)
	}
	if got := raw.n.Load(); got < size {
		t.Errorf("Raw got %d bytes, want at least %d", got, size)
	}
	if grew := int64(peak) - int64(before.HeapInuse); grew > 32<<20 {
		t.Errorf("heap grew by %d MiB", grew>>20)
	}
	got := tm.Read()
	if !strings.HasPrefix(got, "[… ") || !strings.HasSuffix(got, "xxx\nEND\n") || len(got) > 2100*100 {
		t.Errorf("read of %d bytes: %q … %q", len(got), got[:min(len(got), 80)], got[max(0, len(got)-80):])
	}
	t.Logf("%d MiB: heap peak %d MiB above the start, read %d bytes", size>>20, (int64(peak)-int64(before.HeapInuse))>>20, len(got))
}

// TestNoDescriptorLeft runs alone (not in parallel), so that the count of
// this process's file descriptors is this test's alone: a terminal that
// ran to its end and one that was killed leave none open.
func TestNoDescriptorLeft(t *testing.T) {
	fds := testutil.FDs(t)
	tm := helper(t, "repl")
	input(t, tm, "quit", "Enter")
	ended(t, tm)
	tm.Close()
	killed := helper(t, "repl")
	killed.Close()
	if code, sig := killed.Exit(); code != nil || sig != "SIGTERM" {
		t.Errorf("killed REPL: exit code %v, signal %q", code, sig)
	}
	testutil.AssertNoNewFDs(t, fds)
}

// BenchmarkInputRoundTrip types a line into an echoing REPL and waits for
// its answer, as task_input does; it reports the p50 and p90 of the round
// trip without the quiet period Input always waits at the end (target:
// p50 < 5 ms):
//
//	go test -run '^$' -bench InputRoundTrip -benchtime 100x ./internal/term/
func BenchmarkInputRoundTrip(b *testing.B) {
	marker := testutil.Marker(b)
	defer testutil.AssertNoProcesses(b, marker)
	tm, err := term.Start(spawn([]string{os.Args[0]}, append(testutil.Env(marker), "TERMTEST_HELPER=repl")), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer tm.Close()
	for !strings.Contains(tm.Screen(), ">") {
		tm.WaitQuiet(100 * time.Millisecond)
	}
	tm.Read()
	var took []time.Duration
	for b.Loop() {
		start := time.Now()
		out, err := tm.Input("ping", []string{"Enter"}, 5*time.Second)
		took = append(took, time.Since(start)-term.QuietPeriod)
		if err != nil || !strings.Contains(out, "= PING") {
			b.Fatalf("%q, %v", out, err)
		}
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(took[len(took)*9/10].Microseconds())/1000, "p90-ms")
}

// slowWriter takes each write after a pause: an emulator slowed down by a
// loaded machine, as seen from the pump.
type slowWriter struct {
	countingWriter
	pause time.Duration
}

func (w *slowWriter) Write(b []byte) (int, error) {
	time.Sleep(w.pause)
	return w.countingWriter.Write(b)
}

// TestDrainAfterExitKeepsWhatWasWritten: every byte the program wrote
// before it exited reaches the terminal, however far the pump is behind
// when it exits (the grace after the exit bounds the wait for a process
// left holding the terminal, not the reading of what is already there).
func TestDrainAfterExitKeepsWhatWasWritten(t *testing.T) {
	const size = 200 << 10 // more than the kernel's terminal buffers hold
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	raw := &slowWriter{pause: 5 * time.Millisecond}
	tm, err := term.Start(spawn([]string{os.Args[0]}, append(testutil.Env(marker), "TERMTEST_HELPER=flood", "TERMTEST_FLOOD_BYTES="+strconv.Itoa(size))),
		&term.Options{Raw: raw, Grace: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer tm.Close()
	<-tm.Done()
	// The helper writes size bytes of 100-byte lines then "END\n"; the
	// terminal turns each "\n" into "\r\n".
	lines := int64((size + 99) / 100)
	if want := lines*101 + 5; raw.n.Load() != want {
		t.Errorf("the terminal got %d bytes of the %d the program wrote before it exited", raw.n.Load(), want)
	}
	if got := tm.Peek(10); !strings.HasSuffix(got, "END") {
		t.Errorf("the screen ends %q, not with the program's last line", got)
	}
}

// TestDrainEndsBesideALeftoverWriter: a process the program left holding
// the terminal, writing without end, does not hold up the terminal's end
// once the program has exited: the drain of what is queued stops after
// its budget (64 KiB or 200 ms), and Close ends the writer.
func TestDrainEndsBesideALeftoverWriter(t *testing.T) {
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	raw := &slowWriter{pause: time.Millisecond} // behind, so the drain is cut with bytes queued
	tm, err := term.Start(spawn([]string{"bash", "-c", "yes & sleep 0.2; exit 0"}, testutil.Env(marker)),
		&term.Options{Raw: raw, Grace: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer tm.Close()
	select {
	case <-tm.Done():
	case <-time.After(10 * time.Second):
		t.Fatalf("no end 10 s after the program's exit, with %d bytes read", raw.n.Load())
	}
	if code, sig := tm.Exit(); code == nil || *code != 0 {
		t.Errorf("exit %v, %s; want 0", code, sig)
	}
}
