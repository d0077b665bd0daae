//go:build linux

package nsinit

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/conch-dev/conch/internal/frame"
)

// TestSpawnPacked: a spawn's command travels packed after its JSON and
// comes back whole: empty strings, an empty or absent environment, an
// empty argument list, text JSON would escape; a command with a NUL in a
// string travels as JSON instead (its exec then fails as it always did);
// other messages are JSON alone.
func TestSpawnPacked(t *testing.T) {
	long := strings.Repeat("x", 100<<10)
	for _, c := range []struct {
		name   string
		m      message
		packed bool
	}{
		{"plain", message{ID: 7, Op: opSpawn, Path: "/usr/bin/bash", Args: []string{"bash", "-c", "true"}, Env: []string{"A=1", "B="}, Dir: "/tmp", NFDs: 4, Cgroup: true}, true},
		{"empty strings", message{Op: opSpawn, Path: "", Args: []string{"", "", ""}, Env: []string{""}, Dir: ""}, true},
		{"only a directory", message{Op: opSpawn, Dir: "/"}, true},
		{"no environment", message{Op: opSpawn, Path: "/bin/sh", Args: []string{"sh"}}, true},
		{"no arguments", message{Op: opSpawn, Path: "/bin/sh", Env: []string{"A=1"}, Terminal: true}, true},
		{"escaped text", message{Op: opSpawn, Path: "/bin/sh", Args: []string{"sh", "-c", "printf '\"%s\\\\n' é\t\x01 \u2028 </script>"}, Env: []string{"PS1=\\u@\\h \"$ \"", "LONG=" + long}}, true},
		// JSON would have made each invalid byte U+FFFD: packed, a
		// directory or file name in another encoding arrives as it is.
		{"not UTF-8", message{Op: opSpawn, Path: "/bin/caf\xe9", Args: []string{"sh", "\xff\xfe"}, Env: []string{"LATIN=caf\xe9"}, Dir: "/tmp/\xff"}, true},
		{"a NUL", message{Op: opSpawn, Path: "/bin/sh", Args: []string{"sh", "-c", "echo a\x00b"}, Env: []string{"A=1"}}, false},
		{"a NUL in the environment", message{Op: opSpawn, Path: "/bin/sh", Args: []string{"sh"}, Env: []string{"A=\x00"}}, false},
		{"not a spawn", message{ID: 3, Op: opExit, Pid: 12, Status: 256}, false},
		{"a reply with an error", message{ID: 3, Op: opSpawn, Err: "nsinit: spawn: 2 descriptors, want 3"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := encode(&c.m)
			if err != nil {
				t.Fatal(err)
			}
			body, rest, ok, err := frame.Cut(b, maxMessage)
			if !ok || err != nil || len(rest) != 0 {
				t.Fatalf("Cut: %v, %v, %d bytes left", ok, err, len(rest))
			}
			if got := bytes.IndexByte(body, 0) >= 0; got != c.packed {
				t.Fatalf("packed %v, want %v: %q", got, c.packed, body[:min(len(body), 200)])
			}
			m, err := decode(body)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*m, c.m) {
				t.Fatalf("decoded\n%+v\nwant\n%+v", *m, c.m)
			}
		})
	}
}

// TestSpawnPackedMalformed: a packed tail that is cut short, counts more
// arguments than it has, or follows another message is an error, not a
// command.
func TestSpawnPackedMalformed(t *testing.T) {
	for _, c := range []struct{ name, body string }{
		{"no count", `{"op":"spawn"}` + "\x00/bin/sh\x00/tmp"},
		{"count not a number", `{"op":"spawn"}` + "\x00/bin/sh\x00/tmp\x00x\x00sh"},
		{"negative count", `{"op":"spawn"}` + "\x00/bin/sh\x00/tmp\x00-1"},
		{"count too high", `{"op":"spawn"}` + "\x00/bin/sh\x00/tmp\x003\x00sh\x00-c"},
		{"not a spawn", `{"op":"exit"}` + "\x00/bin/sh\x00/tmp\x000"},
		{"broken JSON", `{"op":"spawn"` + "\x00/bin/sh\x00/tmp\x000"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if m, err := decode([]byte(c.body)); err == nil {
				t.Fatalf("decoded %+v, want an error", *m)
			}
		})
	}
	// And a frame too long for the bound is refused at its encoding.
	huge := message{Op: opSpawn, Path: "/bin/sh", Args: []string{strings.Repeat("a", maxMessage)}}
	if _, err := encode(&huge); err == nil {
		t.Fatal("a spawn longer than maxMessage encoded")
	}
}

// FuzzSpawnPacked: any command (its arguments and environment given as
// strings split at "\n") comes back from its frame as it was sent, packed
// or, with a NUL somewhere, as JSON with each invalid UTF-8 byte made
// U+FFFD; and no body makes decode panic.
//
//	go test -run '^$' -fuzz FuzzSpawnPacked ./internal/nsinit/
func FuzzSpawnPacked(f *testing.F) {
	f.Add("/bin/sh", "/tmp", "sh\n-c\necho hi", "A=1\nB=2")
	f.Add("", "", "", "")
	f.Add("/bin/caf\xe9", "/\xff", "\x00", "=\n\n")
	f.Add("p", "d", "3", "\x00\x00")
	f.Fuzz(func(t *testing.T, path, dir, args, env string) {
		split := func(s string) []string {
			if s == "" {
				return nil
			}
			return strings.Split(s, "\n")
		}
		in := message{Op: opSpawn, Path: path, Dir: dir, Args: split(args), Env: split(env), NFDs: 3}
		b, err := encode(&in)
		if err != nil {
			t.Fatal(err)
		}
		body, _, ok, err := frame.Cut(b, maxMessage)
		if !ok || err != nil {
			t.Fatalf("Cut: %v, %v", ok, err)
		}
		out, err := decode(body)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		want := in
		if !packable(&in) {
			// As JSON: what encoding/json makes of the strings.
			var m message
			js, _ := json.Marshal(&in)
			if err := json.Unmarshal(js, &m); err != nil {
				t.Fatal(err)
			}
			want = m
		}
		if !reflect.DeepEqual(*out, want) {
			t.Fatalf("decoded\n%+v\nwant\n%+v", *out, want)
		}
		decode([]byte(path + "\x00" + dir + "\x00" + args)) // must not panic
	})
}
