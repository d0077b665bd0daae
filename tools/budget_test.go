//go:build linux

package tools_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/tools/txtar"
	"pgregory.net/rapid"

	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/tools"
)

// numbered returns n lines "<prefix>-0001\n", "<prefix>-0002\n", ….
func numbered(prefix string, n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "%s-%04d\n", prefix, i)
	}
	return b.String()
}

// kept is what a provider with a memory tail of max bytes reports of a
// stream: the whole of it, or its head, its tail and its counts.
func kept(stream string, max int, spill string, spillErr error) shell.Output {
	if len(stream) <= max {
		return shell.Output{Text: stream, Size: int64(len(stream)), Lines: int64(strings.Count(stream, "\n"))}
	}
	head := stream[:min(shell.HeadBytes, len(stream))]
	for len(head) > 0 && !utf8.ValidString(head) { // a cut character is dropped
		head = head[:len(head)-1]
	}
	tail := stream[len(stream)-max:]
	for len(tail) > 0 && !utf8.RuneStart(tail[0]) {
		tail = tail[1:]
	}
	return shell.Output{Text: tail, Truncated: true, Head: head, SpillPath: spill, SpillErr: spillErr,
		Size: int64(len(stream)), Lines: int64(strings.Count(stream, "\n"))}
}

func exit(n int) *int { return &n }

// goldenArchive pins files as one txtar archive.
func goldenArchive(t *testing.T, name string, files []txtar.File) {
	t.Helper()
	golden(t, name, string(txtar.Format(&txtar.Archive{Files: files})))
}

func jsonText(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

const smallBudget = 2000

// TestRenderBudget pins every shape of a foreground result at the edges
// of its budget, from constructed results (the renderer is a pure
// function of them).
func TestRenderBudget(t *testing.T) {
	t.Parallel()
	const spillOut, spillErr = "/spill/a1-stdout", "/spill/b2-stderr"
	marker := "[exit code: 1]"
	// The budget counts the text as JSON encodes it: the newline takes 2.
	atBudget := strings.Repeat("a", smallBudget-len(marker)-2) + "\n"
	capErr := &shell.SpillCapError{Cap: 64 << 20}
	oneMB := strings.Repeat("x", 1<<20)
	multi := strings.Repeat("é日本語ü", 2000) // 12 bytes a round, no newline
	cases := []struct {
		name   string
		res    shell.Result
		budget int
		cutOut bool
		cutErr bool
		want   []string // substrings of the text
	}{
		{name: "fits", res: shell.Result{ExitCode: exit(1), Stdout: kept("out\n", 64000, "", nil), Stderr: kept("err\n", 64000, "", nil)}},
		{name: "exactly_at_budget", res: shell.Result{ExitCode: exit(1), Stdout: kept(atBudget, 64000, "", nil)}},
		{name: "one_byte_over", res: shell.Result{ExitCode: exit(1), Stdout: kept("a"+atBudget, 64000, "", nil)}, cutOut: true,
			want: []string{"[… ", " omitted; full output: (unavailable: not saved to a file)]\n"}},
		{name: "stdout_over", res: shell.Result{ExitCode: exit(0), Stdout: kept(numbered("out", 400), 64000, "", nil), Stderr: kept(numbered("err", 3), 64000, "", nil)},
			cutOut: true, want: []string{"out-0001\n", "out-0400\n", "[stderr]\nerr-0001\nerr-0002\nerr-0003\n"}},
		{name: "stderr_over", res: shell.Result{ExitCode: exit(2), Stdout: kept(numbered("out", 3), 64000, "", nil), Stderr: kept(numbered("err", 400), 64000, "", nil)},
			cutErr: true, want: []string{"out-0001\nout-0002\nout-0003\n[stderr]\nerr-0001\n", "err-0400\n[exit code: 2]"}},
		{name: "both_over", res: shell.Result{ExitCode: exit(1), Stdout: kept(numbered("out", 400), 64000, "", nil), Stderr: kept(numbered("err", 400), 64000, "", nil)},
			cutOut: true, cutErr: true},
		{name: "both_spilled", res: shell.Result{ExitCode: exit(1), Stdout: kept(numbered("out", 20000), 64000, spillOut, nil), Stderr: kept(numbered("err", 20000), 64000, spillErr, nil)},
			cutOut: true, cutErr: true, want: []string{"out-0001\n", "; full output: " + spillOut + "]\n", "; full output: " + spillErr + "]\n"}},
		{name: "one_megabyte_line", res: shell.Result{Stdout: kept(oneMB, 64000, spillOut, nil)}, cutOut: true},
		{name: "multibyte_at_both_cuts", res: shell.Result{Stdout: kept(multi, 64000, "", nil)}, cutOut: true},
		{name: "multibyte_truncated", res: shell.Result{Stdout: kept(strings.Repeat("日本語", 30000), 64000, spillOut, nil)}, cutOut: true},
		{name: "truncated_head_holds_all", res: shell.Result{Stdout: kept(numbered("out", 10), 20, spillOut, nil)},
			want: []string{"out-0001\n", "out-0010\n"}},
		{name: "truncated_small", res: shell.Result{Stdout: kept(numbered("out", 300), 20, spillOut, nil)}, cutOut: true,
			want: []string{"out-0001\n", "out-0300\n"}},
		{name: "spill_over_cap", res: shell.Result{Stdout: kept(numbered("out", 20000), 64000, "", capErr)}, cutOut: true,
			want: []string{"full output: (unavailable: over the 64 MiB spill cap)]"}},
		{name: "spill_not_written", res: shell.Result{Stdout: kept(numbered("out", 20000), 64000, "", errors.New("disk full"))}, cutOut: true,
			want: []string{"full output: (unavailable: the spill file could not be written)]"}},
		{name: "markers", res: shell.Result{Signal: "SIGTERM", TimedOut: true, Timeout: 1500e6, LeftRunning: true, Stdout: kept(numbered("out", 400), 64000, "", nil)},
			cutOut: true, want: []string{"\n[a process started by this command is still running and holding its output; its further output is discarded (use run_in_background to keep it)]\n[timed out after 1500ms]\n[killed by signal: SIGTERM]"}},
		{name: "left_running", res: shell.Result{ExitCode: exit(0), LeftRunning: true, Stdout: kept("ok\n", 64000, "", nil)},
			want: []string{"ok\n[a process started by this command is still running and holding its output; its further output is discarded (use run_in_background to keep it)]"}},
		{name: "escapes", res: shell.Result{ExitCode: exit(0), Stdout: kept("\x1b[1;32mPASS\x1b[0m ok\n10%\r50%\r100%\r\n\x1b]0;title\x07done\r\n", 64000, "", nil)},
			want: []string{"PASS ok\n100%\r\ndone\r\n"}},
		{name: "escapes_cut", res: shell.Result{ExitCode: exit(0), Stdout: kept(strings.Repeat("\x1b[32mok\x1b[0m line\n", 500), 64000, "", nil)}, cutOut: true},
		{name: "default_budget_both_over", budget: tools.DefaultMaxResultBytes,
			res:    shell.Result{ExitCode: exit(1), Stdout: kept(numbered("out", 20000), 64000, spillOut, nil), Stderr: kept(numbered("err", 20000), 64000, spillErr, nil)},
			cutOut: true, cutErr: true},
	}
	var files []txtar.File
	for _, c := range cases {
		budget := c.budget
		if budget == 0 {
			budget = smallBudget
		}
		text, v := tools.RenderForegroundValue(c.res, budget)
		if n := tools.EncodedLen(text); n > budget {
			t.Errorf("%s: %d bytes encoded, over the budget of %d", c.name, n, budget)
		}
		if n := tools.EncodedLen(text); c.name == "exactly_at_budget" && n != budget {
			t.Errorf("%s: %d bytes encoded, want exactly %d", c.name, n, budget)
		}
		if !utf8.ValidString(text) {
			t.Errorf("%s: invalid UTF-8", c.name)
		}
		if v.Stdout.Truncated != c.cutOut || v.Stderr.Truncated != c.cutErr {
			t.Errorf("%s: truncated stdout %v stderr %v, want %v %v", c.name, v.Stdout.Truncated, v.Stderr.Truncated, c.cutOut, c.cutErr)
		}
		// The value carries the texts shown, no more.
		if !strings.HasPrefix(text, v.Stdout.Text) || !strings.Contains(text, v.Stderr.Text) {
			t.Errorf("%s: the value's texts are not the text's", c.name)
		}
		if c.cutOut && c.cutErr {
			room := budget - tools.EncodedLen(text[len(text)-markerRoom(text):])
			if n := tools.EncodedLen(v.Stderr.Text); n > room/3 {
				t.Errorf("%s: stderr took %d bytes of %d, more than a third", c.name, n, room)
			}
		}
		for _, w := range c.want {
			if !strings.Contains(text, w) {
				t.Errorf("%s: text lacks %q:\n%s", c.name, w, text)
			}
		}
		if c.name != "escapes_cut" { // its shown text is not its raw bytes
			checkCuts(t, c.name, v.Stdout.Text, c.res.Stdout)
			checkCuts(t, c.name, v.Stderr.Text, c.res.Stderr)
		} else if n := tools.EncodedLen(text); n < budget-200 {
			t.Errorf("%s: %d bytes encoded of a budget of %d: the removed escapes left room unused", c.name, n, budget)
		}
		files = append(files, txtar.File{Name: c.name + ".txt", Data: []byte(text + "\n")}, txtar.File{Name: c.name + ".json", Data: jsonText(t, v)})
	}
	goldenArchive(t, "foreground.txtar", files)
}

// markerRoom is what the markers after a body take.
func markerRoom(text string) int {
	i := strings.Index(text, "\n[exit code: ")
	if i < 0 {
		return 0
	}
	return len(text) - i
}

// wholeOf is the whole stream when o holds it, else "".
func wholeOf(o shell.Output) string {
	switch {
	case !o.Truncated:
		return o.Text
	case int64(len(o.Head)) == o.Size:
		return o.Head
	}
	return "\x00not whole"
}

var cutLineRE = regexp.MustCompile(`\[… (\d+) bytes \((\d+) lines\) omitted; full output: [^\n]*\]`)

// checkCuts checks a shown stream against what the provider kept of it:
// a head that is a prefix of the stream, a tail that is a suffix, and a
// cut line whose counts are exactly what lies between.
func checkCuts(t *testing.T, name, shown string, o shell.Output) {
	t.Helper()
	m := cutLineRE.FindStringSubmatchIndex(shown)
	if m == nil {
		if shown != tools.CleanText(wholeOf(o)) {
			t.Errorf("%s: uncut stream %q is not the stream", name, shown)
		}
		return
	}
	n, _ := strconv.ParseInt(shown[m[2]:m[3]], 10, 64)
	l, _ := strconv.ParseInt(shown[m[4]:m[5]], 10, 64)
	before, after := shown[:m[0]], strings.TrimPrefix(shown[m[1]:], "\n")
	start := o.Text
	if o.Truncated {
		start = o.Head
	}
	if !strings.HasSuffix(o.Text, after) {
		t.Errorf("%s: tail %.40q… is not a suffix of the stream", name, after)
	}
	for _, h := range []string{before, strings.TrimSuffix(before, "\n")} {
		if strings.HasPrefix(start, h) && n == o.Size-int64(len(h))-int64(len(after)) &&
			l == o.Lines-int64(strings.Count(h, "\n"))-int64(strings.Count(after, "\n")) {
			return
		}
	}
	t.Errorf("%s: head %.40q… and tail do not account for %d bytes (%d lines) omitted of %d (%d)", name, before, n, l, o.Size, o.Lines)
}

// TestRenderReadBudget pins reads held to a budget: a read that fell
// behind starts with its cut line; a long one is cut like a result.
func TestRenderReadBudget(t *testing.T) {
	t.Parallel()
	long := numbered("out", 400)
	cases := []struct {
		name string
		in   shell.ReadResult
		want string // a prefix of the text
	}{
		{"empty", shell.ReadResult{}, ""},
		{"plain", shell.ReadResult{Stdout: "a\n"}, "a\n"},
		{"streams", shell.ReadResult{Stdout: "a", Stderr: "b\n"}, "a\n[stderr]\nb\n"},
		{"lossy_stdout", shell.ReadResult{Stdout: "tail\n", Lossy: true, StdoutSpill: "/s/x-stdout", StdoutSkipped: shell.Omission{Bytes: 123456, Lines: 789}},
			"[… 123456 bytes (789 lines) omitted; full output: /s/x-stdout]\ntail\n"},
		{"lossy_both", shell.ReadResult{Stdout: "tail\n", Stderr: "etail\n", Lossy: true, StdoutSpill: "/s/x-stdout", StderrSpill: "/s/y-stderr",
			StdoutSkipped: shell.Omission{Bytes: 10, Lines: 1}, StderrSkipped: shell.Omission{Bytes: 20, Lines: 2}},
			"[… 10 bytes (1 lines) omitted; full output: /s/x-stdout]\ntail\n[stderr]\n[… 20 bytes (2 lines) omitted; full output: /s/y-stderr]\netail\n"},
		{"lossy_empty_delta", shell.ReadResult{Lossy: true, StdoutSpill: "/s/x-stdout", StdoutSkipped: shell.Omission{Bytes: 5, Lines: 0}},
			"[… 5 bytes (0 lines) omitted; full output: /s/x-stdout]"},
		{"lossy_over_cap", shell.ReadResult{Stdout: "tail\n", Lossy: true, StdoutSpillErr: &shell.SpillCapError{Cap: 1536}, StdoutSkipped: shell.Omission{Bytes: 7, Lines: 1}},
			"[… 7 bytes (1 lines) omitted; full output: (unavailable: over the 1.5 KiB spill cap)]\ntail\n"},
		{"lossy_not_written", shell.ReadResult{Stdout: "tail\n", Lossy: true, StdoutSkipped: shell.Omission{Bytes: 7, Lines: 1}},
			"[… 7 bytes (1 lines) omitted; full output: (unavailable: the spill file could not be written)]\ntail\n"},
		{"long_delta", shell.ReadResult{Stdout: long}, "out-0001\n"},
		{"long_lossy_delta", shell.ReadResult{Stdout: long, Lossy: true, StdoutSpill: "/s/x-stdout", StdoutSkipped: shell.Omission{Bytes: 1000, Lines: 100}},
			"[… "},
	}
	var files []txtar.File
	for _, c := range cases {
		got := tools.RenderRead(c.in, smallBudget)
		if !strings.HasPrefix(got, c.want) || tools.EncodedLen(got) > smallBudget {
			t.Errorf("%s: RenderRead = %q (%d bytes), want it to start %q", c.name, got, len(got), c.want)
		}
		if strings.HasPrefix(c.name, "long") {
			o := kept(c.in.Stdout, 64000, "", nil)
			if c.in.Lossy {
				o = shell.Output{Text: c.in.Stdout, Truncated: true, Size: 1000 + int64(len(long)), Lines: 100 + 400}
			}
			checkCuts(t, c.name, got, o)
		}
		files = append(files, txtar.File{Name: c.name, Data: []byte(got + "\n")})
	}
	goldenArchive(t, "read.txtar", files)
}

func TestHumanBytes(t *testing.T) {
	for n, want := range map[int64]string{
		0: "0 B", 1023: "1023 B", 1024: "1 KiB", 1536: "1.5 KiB", 1<<20 - 1: "1023.9 KiB",
		64 << 20: "64 MiB", 1 << 30: "1 GiB", 3<<30 + 1: "3.0 GiB", 5 << 40: "5 TiB",
	} {
		if got := tools.HumanBytes(n); got != want {
			t.Errorf("HumanBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestCleanText(t *testing.T) {
	for in, want := range map[string]string{
		"plain\n":                      "plain\n",
		"\x1b[1;31mred\x1b[0m\n":       "red\n",
		"10%\r20%\r30%\n":              "30%\n",
		"crlf\r\nline\r\n":             "crlf\r\nline\r\n",
		"a\r\r\nb":                     "a\r\nb",
		"trailing\r":                   "trailing",
		"50%\r\x1b[K60%\n":             "60%\n",
		"\x1b]0;window title\x07after": "after",
		"\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\": "link",
		"\x1b]unterminated\nnext":                  "\nnext",
		"\x1b(Bcharset \x1b7saved":                 "charset saved",
		"bad \xff\xfe bytes":                       "bad \uFFFD bytes",
		"lone \x1b":                                "lone ",
		"\x1b\x1b[2Jx":                             "x",
		"csi \x1b[12\nbroken":                      "csi \nbroken",
	} {
		if got := tools.CleanText(in); got != want {
			t.Errorf("CleanText(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzCleanText: the cleaner never panics, gives valid UTF-8 with no ESC
// and no lone carriage return, and is idempotent.
func FuzzCleanText(f *testing.F) {
	for _, s := range []string{"\x1b[1;31mred\x1b[0m\n", "10%\r20%\r\n", "\x1b]0;t\x07x", "\xff\x1b", "a\r\r\nb\r", "\x1bP..\x1b\\"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := tools.CleanText(s)
		if !utf8.ValidString(got) || strings.ContainsRune(got, 0x1b) {
			t.Fatalf("CleanText(%q) = %q", s, got)
		}
		if strings.Contains(strings.ReplaceAll(got, "\r\n", ""), "\r") {
			t.Fatalf("CleanText(%q) = %q keeps a lone carriage return", s, got)
		}
		if again := tools.CleanText(got); again != got {
			t.Fatalf("not idempotent: %q → %q → %q", s, got, again)
		}
	})
}

// TestBudgetProperty: for any pair of streams, as any provider keeps
// them, and any budget, the text stays within the budget, every shown
// head and tail is the stream's own start and end (cut at a line when a
// newline is near), and each cut line counts exactly what it stands for.
func TestBudgetProperty(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		// Streams of up to 20,000 lines, from a few drawn lines repeated
		// with a counter (drawing every line would keep them small).
		stream := func(label string) string {
			// Characters JSON escapes too: the budget counts them encoded.
			lines := rapid.SliceOfN(rapid.StringOfN(rapid.SampledFrom([]rune("ab é日\t\"\x01<\u2028\\")), 0, 400, -1), 1, 8).Draw(t, label)
			n := rapid.IntRange(0, 20000).Draw(t, label+"-lines")
			var b strings.Builder
			for i := range n {
				b.WriteString(lines[i%len(lines)] + strconv.Itoa(i) + "\n")
			}
			s := b.String()
			if rapid.Bool().Draw(t, label+"-unterminated") {
				s = strings.TrimSuffix(s, "\n")
			}
			return s
		}
		out, errS := stream("stdout"), stream("stderr")
		max := rapid.IntRange(1, 70000).Draw(t, "maxOutputBytes")
		budget := rapid.IntRange(tools.MinResultBytes, 40000).Draw(t, "budget")
		res := shell.Result{ExitCode: exit(rapid.IntRange(0, 2).Draw(t, "exit")),
			Stdout: kept(out, max, "/spill/o-stdout", nil), Stderr: kept(errS, max, "", &shell.SpillCapError{Cap: 1 << 26})}
		text, v := tools.RenderForegroundValue(res, budget)
		if n := tools.EncodedLen(text); n > budget {
			t.Fatalf("%d bytes encoded, over a budget of %d", n, budget)
		}
		checkCutsRapid(t, v.Stdout.Text, res.Stdout)
		checkCutsRapid(t, v.Stderr.Text, res.Stderr)
	})
}

func checkCutsRapid(t *rapid.T, shown string, o shell.Output) {
	t.Helper()
	m := cutLineRE.FindStringSubmatchIndex(shown)
	if m == nil {
		if shown != wholeOf(o) {
			t.Fatalf("uncut stream %q is not the stream %q", shown, o.Text)
		}
		return
	}
	n, _ := strconv.ParseInt(shown[m[2]:m[3]], 10, 64)
	l, _ := strconv.ParseInt(shown[m[4]:m[5]], 10, 64)
	before, after := shown[:m[0]], strings.TrimPrefix(shown[m[1]:], "\n")
	start, end := o.Head, o.Text
	if whole := wholeOf(o); whole != "\x00not whole" {
		start, end = whole, whole
	}
	if !strings.HasSuffix(end, after) {
		t.Fatalf("tail %q is not a suffix of %q", after, end)
	}
	// A cut off a line boundary has no newline near it.
	if rest := end[:len(end)-len(after)]; after != "" && rest != "" && rest[len(rest)-1] != '\n' &&
		strings.Contains(after[:min(len(after), 197)], "\n") {
		t.Fatalf("tail %q starts mid-line with a newline near", after)
	}
	for _, h := range []string{before, strings.TrimSuffix(before, "\n")} {
		if !strings.HasPrefix(start, h) || n != o.Size-int64(len(h))-int64(len(after)) ||
			l != o.Lines-int64(strings.Count(h, "\n"))-int64(strings.Count(after, "\n")) {
			continue
		}
		if h != "" && h[len(h)-1] != '\n' && strings.Contains(h[max(0, len(h)-197):], "\n") {
			t.Fatalf("head %q ends mid-line with a newline near", h)
		}
		return
	}
	t.Fatalf("head %q and tail %q do not account for %d bytes (%d lines) omitted of %d (%d)", before, after, n, l, o.Size, o.Lines)
}

// BenchmarkRenderFullTails renders a result from two full 64,000-byte
// tails (target: under 1 ms).
func BenchmarkRenderFullTails(b *testing.B) {
	line := strings.Repeat("x", 79) + "\n"
	stream := strings.Repeat(line, 10000) // 800 KB
	res := shell.Result{ExitCode: exit(1),
		Stdout: kept(stream, 64000, "/spill/o-stdout", nil), Stderr: kept(stream, 64000, "/spill/e-stderr", nil)}
	for b.Loop() {
		if text := tools.RenderForeground(res, tools.DefaultMaxResultBytes); tools.EncodedLen(text) > tools.DefaultMaxResultBytes {
			b.Fatal(len(text))
		}
	}
}

// FuzzRenderBudget: whatever the streams hold (escapes, carriage returns,
// invalid UTF-8) and however a provider kept them, a result stays within
// its budget, is valid UTF-8 and carries no escape byte.
func FuzzRenderBudget(f *testing.F) {
	f.Add("out\n", "err\n", uint16(64000), uint16(0))
	f.Add(strings.Repeat("\x1b[31mred\x1b[0m\r\n", 300), strings.Repeat("\xff\xfe", 900), uint16(100), uint16(500))
	f.Fuzz(func(t *testing.T, stdout, stderr string, max, extra uint16) {
		budget := tools.MinResultBytes + int(extra)
		res := shell.Result{ExitCode: exit(3),
			Stdout: kept(stdout, int(max)+1, "/spill/o-stdout", nil), Stderr: kept(stderr, int(max)+1, "", nil)}
		text := tools.RenderForeground(res, budget)
		if tools.EncodedLen(text) > budget || !utf8.ValidString(text) || strings.ContainsRune(text, 0x1b) {
			t.Fatalf("%d bytes (budget %d), valid %v: %q", len(text), budget, utf8.ValidString(text), text)
		}
		read := tools.RenderRead(shell.ReadResult{Stdout: stdout, Stderr: stderr, Lossy: true,
			StdoutSkipped: shell.Omission{Bytes: int64(max), Lines: 1}}, budget)
		if tools.EncodedLen(read) > budget || !utf8.ValidString(read) {
			t.Fatalf("read: %d bytes (budget %d): %q", len(read), budget, read)
		}
	})
}

func TestJoinStreams(t *testing.T) {
	for _, tc := range []struct{ out, err, want string }{
		{"", "", ""},
		{"a\n", "", "a\n"},
		{"", "e\n", "[stderr]\ne\n"},
		{"a", "e", "a\n[stderr]\ne"},
		{"a\n", "e\n", "a\n[stderr]\ne\n"},
	} {
		if got := tools.JoinStreams(tc.out, tc.err); got != tc.want {
			t.Errorf("JoinStreams(%q, %q) = %q, want %q", tc.out, tc.err, got, tc.want)
		}
	}
}

// A spill file of a remote host is shown with the host's name.
func TestHostPath(t *testing.T) {
	for _, tc := range []struct{ host, path, want string }{
		{"", "/tmp/s/stdout", "/tmp/s/stdout"},
		{"h1", "/tmp/s/stdout", "h1:/tmp/s/stdout"},
		{"h1", "", ""},
	} {
		if got := tools.HostPath(tc.host, tc.path); got != tc.want {
			t.Errorf("HostPath(%q, %q) = %q, want %q", tc.host, tc.path, got, tc.want)
		}
	}
}

// FuzzEncodedLen: encodedLen counts what json.Marshal writes for a string
// (quotes aside), and encodedPrefix and encodedSuffix give the longest
// prefix and suffix, cut at a character, that encode within a size.
func FuzzEncodedLen(f *testing.F) {
	for _, s := range []string{"", "plain", "\"quoted\"\\", "\x01\x1f\x7f\b\f\n\r\t", "<a>&b", "\u2028\u2029", "é日本", "\xff\xfe bad", "\xe2\x80"} {
		f.Add(s, uint16(7))
	}
	f.Fuzz(func(t *testing.T, s string, n uint16) {
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := tools.EncodedLen(s); got != len(b)-2 {
			t.Fatalf("EncodedLen(%q) = %d, json.Marshal writes %d bytes: %s", s, got, len(b)-2, b)
		}
		limit := int(n) % (len(b) + 2)
		p := tools.EncodedPrefix(s, limit)
		if tools.EncodedLen(s[:p]) > limit || (p < len(s) && tools.EncodedLen(s[:p+runeLen(s[p:])]) <= limit) || !boundary(s, p) {
			t.Fatalf("EncodedPrefix(%q, %d) = %d", s, limit, p)
		}
		q := tools.EncodedSuffix(s, limit)
		if tools.EncodedLen(s[q:]) > limit || !boundary(s, q) {
			t.Fatalf("EncodedSuffix(%q, %d) = %d", s, limit, q)
		}
		if q > 0 {
			_, size := utf8.DecodeLastRuneInString(s[:q])
			if tools.EncodedLen(s[q-size:]) <= limit {
				t.Fatalf("EncodedSuffix(%q, %d) = %d, one more character fits", s, limit, q)
			}
		}
	})
}

func runeLen(s string) int { _, n := utf8.DecodeRuneInString(s); return n }

// boundary reports whether i starts a character of s as DecodeRune steps
// through it (an invalid byte is a character of its own).
func boundary(s string, i int) bool {
	for j := 0; j < len(s); j += runeLen(s[j:]) {
		if j == i {
			return true
		}
	}
	return i == len(s)
}
