package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	src := `# conch
provider = "local"
timeout_ms = 5_000
grace_ms = 1.5
no_background = true

[env]
pass = ["GITHUB_TOKEN", "NPM_TOKEN"]

[serve]
http = "127.0.0.1:7433"
`
	got, err := Parse("c.toml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := []Entry{
		{Key: "provider", Values: []string{"local"}, File: "c.toml", Line: 2},
		{Key: "timeout_ms", Values: []string{"5000"}, File: "c.toml", Line: 3},
		{Key: "grace_ms", Values: []string{"1.5"}, File: "c.toml", Line: 4},
		{Key: "no_background", Values: []string{"true"}, File: "c.toml", Line: 5},
		{Key: "env.pass", Values: []string{"GITHUB_TOKEN", "NPM_TOKEN"}, Array: true, File: "c.toml", Line: 8},
		{Key: "serve.http", Values: []string{"127.0.0.1:7433"}, File: "c.toml", Line: 11},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
	if w := got[4].Where(); w != "c.toml:8" {
		t.Errorf("Where = %q", w)
	}
}

func TestParseDottedKeyAndEmptyArray(t *testing.T) {
	got, err := Parse("c.toml", []byte("env.pass = []\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []Entry{{Key: "env.pass", Values: []string{}, Array: true, File: "c.toml", Line: 1}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
}

func TestParseErrorsNameFileLineAndKey(t *testing.T) {
	for _, tc := range []struct {
		name, src, want string
	}{
		{"syntax", "timeout_ms = 1\ngrace_ms = \n", "config c.toml:2: "},
		{"duplicate", "a = 1\n\nb = 2\na = 3\n", "config c.toml:4: a: already set on line 1"},
		{"inline table", "x = 1\n[env]\npass = {a = 1}\n", "config c.toml:3: env.pass: inline tables are not supported"},
		{"nested array", "[env]\npass = [[\"a\"]]\n", "config c.toml:2: env.pass: nested arrays are not supported"},
		{"array of tables", "\n[[hosts]]\n", "config c.toml:2: hosts: arrays of tables are not supported"},
		{"datetime", "when = 1979-05-27\n", "config c.toml:1: when: a localdate value is not supported"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("c.toml", []byte(tc.src))
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v, want a *config.Error", err)
			}
			if !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("err = %q, want it to start with %q", err, tc.want)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(p, []byte("max_tasks = 3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := Load(p, false)
	if err != nil || len(got) != 1 || got[0].File != p {
		t.Fatalf("Load = %+v, %v", got, err)
	}

	missing := filepath.Join(dir, "none.toml")
	if got, err := Load(missing, true); err != nil || got != nil {
		t.Errorf("optional missing file: %v, %v", got, err)
	}
	_, err = Load(missing, false)
	if !errors.Is(err, os.ErrNotExist) || !strings.HasPrefix(err.Error(), "config "+missing+": ") {
		t.Errorf("required missing file: %v", err)
	}

	if _, err := Load(dir, false); !errors.Is(err, ErrNotRegular) {
		t.Errorf("a directory: %v", err)
	}
}

// A FIFO or a device in place of the file must be refused at once, not
// read forever: conch starts from it.
func TestLoadRefusesFIFOAndDevices(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "config.toml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{fifo, "/dev/zero"} {
		done := make(chan error, 1)
		go func() { _, err := Load(p, false); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, ErrNotRegular) {
				t.Errorf("Load(%s) = %v, want ErrNotRegular", p, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("Load(%s) hangs", p)
		}
	}
}

func TestLoadRefusesHugeFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(p, make([]byte, MaxFileBytes+1), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(p, false); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("Load = %v", err)
	}
}

func TestDefaultPath(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", "/x/cfg")
	if got := DefaultPath(); got != "/x/cfg/conch/config.toml" {
		t.Errorf("with XDG_CONFIG_HOME: %q", got)
	}
	t.Setenv("XDG_CONFIG_HOME", "relative")
	t.Setenv("HOME", "/home/u")
	if got := DefaultPath(); got != "/home/u/.config/conch/config.toml" {
		t.Errorf("relative XDG_CONFIG_HOME: %q", got)
	}
}

func FuzzParse(f *testing.F) {
	f.Add("a = 1\n[env]\npass = [\"x\"]\n")
	f.Add("[a.b]\nc.d = 'e'\n")
	f.Add("x = {y = [1, 2]}\n")
	f.Fuzz(func(t *testing.T, src string) {
		entries, err := Parse("f.toml", []byte(src))
		if err != nil {
			var ce *Error
			if !errors.As(err, &ce) || ce.File != "f.toml" {
				t.Fatalf("error %v is not a *config.Error naming the file", err)
			}
			return
		}
		for _, e := range entries {
			if e.Key == "" || e.Line < 1 {
				t.Fatalf("entry %+v has no key or line", e)
			}
		}
	})
}

// [[mcp.clients]] is the one array of tables: its elements' keys are
// numbered from 1.
func TestParseClients(t *testing.T) {
	src := "[[mcp.clients]]\nname = \"a\"\ntoken = \"t1\"\n\n[[mcp.clients]]\nname = \"b\"\n[sandbox]\nmode = \"read-only\"\n"
	got, err := Parse("c.toml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := []Entry{
		{Key: "mcp.clients.1.name", Values: []string{"a"}, File: "c.toml", Line: 2},
		{Key: "mcp.clients.1.token", Values: []string{"t1"}, File: "c.toml", Line: 3},
		{Key: "mcp.clients.2.name", Values: []string{"b"}, File: "c.toml", Line: 6},
		{Key: "sandbox.mode", Values: []string{"read-only"}, File: "c.toml", Line: 8},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
}
