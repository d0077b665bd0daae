//go:build linux

package main

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conch-dev/conch/internal/testutil"
)

// TestCacheLayerWorkflows: on the defaults, through `conch run`, a
// command builds a Go module with the user's warm build cache, adds a
// module from the module proxy (module cache and checksum database) and
// installs an npm package from the registry, all without a question;
// the user's own cache directories keep every byte. The command also
// patches the Go build cache entries holding the program's text (the
// poisoning of issue 19 item 4): the user's own `go run` outside conch
// afterwards prints the real text. As root and as uid 65534.
func TestCacheLayerWorkflows(t *testing.T) {
	for _, tool := range []string{"go", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s", tool)
		}
	}
	t.Parallel()
	for _, nobody := range []bool{false, true} {
		t.Run(fmt.Sprintf("nobody=%v", nobody), func(t *testing.T) {
			t.Parallel()
			testCacheLayerWorkflows(t, nobody)
		})
	}
}

func testCacheLayerWorkflows(t *testing.T, nobody bool) {
	marker := testutil.Marker(t)
	t.Cleanup(func() { testutil.AssertNoProcesses(t, marker) })
	home, ws := sandboxDirs(t, nobody)
	base := filepath.Dir(home)
	state, tmp := filepath.Join(base, "state"), filepath.Join(base, "tmp")
	writeFile(t, filepath.Join(ws, "hello", "go.mod"), "module hello\n\ngo 1.21\n")
	writeFile(t, filepath.Join(ws, "hello", "main.go"), "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"hello-real\") }\n")
	writeFile(t, filepath.Join(ws, "js", "package.json"), `{"name": "js", "version": "1.0.0"}`+"\n")
	for _, d := range []string{state, tmp} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if nobody {
		for _, d := range []string{home, ws, state, tmp} {
			chownTree(t, d)
		}
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "LANG=C", "TMPDIR=" + tmp, "XDG_STATE_HOME=" + state,
		"GOTOOLCHAIN=local", "GOFLAGS=-buildvcs=false", "GOPROXY=" + goEnv(t, "GOPROXY"), testutil.MarkerEnv + "=" + marker}
	user := func(dir string, args ...string) string {
		t.Helper()
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir, cmd.Env = dir, env
		if nobody {
			testutil.Unprivileged(t, cmd)
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%q: %v\n%s", args, err, out)
		}
		return string(out)
	}
	// The user's own run warms the user's build cache.
	if got := user(filepath.Join(ws, "hello"), "go", "run", "."); got != "hello-real\n" {
		t.Fatalf("the user's go run: %q", got)
	}
	caches := []string{filepath.Join(home, ".cache"), filepath.Join(home, ".npm"), filepath.Join(home, "go")}
	sums := map[string]string{}
	for _, c := range caches {
		sums[c] = testutil.TreeSum(t, c)
	}
	script := `set -e
cd hello && go build -o /dev/null . && echo built
for f in $(grep -rl hello-real ~/.cache/go-build); do sed -i s/hello-real/hello-evil/ $f; done; echo poisoned
go run .
go get github.com/google/go-cmp@v0.7.0 2>/dev/null && echo got
cd ../js && npm install --no-audit --no-fund is-number@7.0.0 >/dev/null 2>&1 && node -e 'console.log(require("is-number")(7))'`
	run := exec.Command(testutil.ConchBinary(t), "run", "--cwd", ws, "--timeout-ms", "600000", "--", script)
	run.Env = env
	if nobody {
		testutil.Unprivileged(t, run)
	}
	var stderr strings.Builder // conch's own warnings (no network policy for a user who cannot open /dev/net/tun)
	run.Stderr = &stderr
	out, err := run.Output()
	if want := "built\npoisoned\nhello-evil\ngot\ntrue\n"; err != nil || string(out) != want {
		t.Errorf("conch run: %v\n got %q\nwant %q\nstderr: %s", err, out, want, stderr.String())
	}
	for _, c := range caches {
		if sums[c] == "" {
			// conch made it (the layer's mount points: ~/go/pkg/mod and
			// ~/go/pkg/sumdb in ~/go): directories only, nothing in them.
			filepath.WalkDir(c, func(p string, d fs.DirEntry, err error) error {
				if err != nil || !d.IsDir() {
					t.Errorf("the user's %s, made by conch, holds %s (%v)", c, p, err)
				}
				return nil
			})
		} else if got := testutil.TreeSum(t, c); got != sums[c] {
			t.Errorf("the user's %s changed", c)
		}
	}
	if got := user(filepath.Join(ws, "hello"), "go", "run", "."); got != "hello-real\n" {
		t.Errorf("the user's go run after conch: %q", got)
	}
}

// goEnv is this machine's value of a go env variable, for the proxy the
// test must reach.
func goEnv(t *testing.T, key string) string {
	t.Helper()
	out, err := exec.Command("go", "env", key).Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}
