package sandbox

import (
	"slices"
	"testing"
)

// TestMarkers pins the marker lines of CONTRACT 11 and 17.2 drawn from a
// record: one per distinct marker, at most five, then how many more.
func TestMarkers(t *testing.T) {
	ws := &Plan{Mode: WorkspaceWrite, Network: NetworkOff, Writable: []string{"/home/u/proj", "/tmp", "/home/u/.cache"}}
	ro := &Plan{Mode: ReadOnly, Network: NetworkOn, Writable: []string{"/tmp"}}
	cases := []struct {
		name   string
		plan   *Plan
		denied []Denial
		more   int
		want   []string
	}{
		{"nothing", ws, nil, 0, nil},
		{"write outside", ws, []Denial{{Path: "/home/u/x", Op: "write", Kind: KindOutside}}, 0,
			[]string{"[sandbox: write to /home/u/x denied under workspace-write mode; writable: /home/u/proj, /tmp, /home/u/.cache]"}},
		{"read-only mode", ro, []Denial{{Path: "/home/u/proj/built", Op: "write", Kind: KindOutside}}, 0,
			[]string{"[sandbox: write to /home/u/proj/built denied under read-only mode; writable: /tmp]"}},
		{"protected", ws, []Denial{{Path: "/home/u/proj/.git/hooks/pre-commit", Op: "write", Kind: KindProtected}}, 0,
			[]string{"[sandbox: /home/u/proj/.git/hooks/pre-commit is read-only (protected)]"}},
		{"unix socket", ws, []Denial{{Path: "/run/docker.sock", Op: "connect", Kind: KindSocket}}, 0,
			[]string{"[sandbox: connect to unix socket /run/docker.sock denied under workspace-write mode]"}},
		{"network, twice", ws, []Denial{{Op: "connect", Kind: KindNetwork}, {Op: "connect", Kind: KindNetwork}}, 0,
			[]string{"[sandbox: network is off for commands]"}},
		{"read of a hidden path", ws, []Denial{{Path: "/home/u/proj/.env", Op: "read", Kind: KindRead}}, 0,
			[]string{"[sandbox: file access denied under workspace-write mode]"}},
		{"seven, two hidden", ws, []Denial{
			{Path: "/a", Op: "write", Kind: KindProtected}, {Path: "/b", Op: "write", Kind: KindProtected},
			{Path: "/a", Op: "write", Kind: KindProtected}, {Path: "/c", Op: "write", Kind: KindProtected},
			{Path: "/d", Op: "write", Kind: KindProtected}, {Path: "/e", Op: "write", Kind: KindProtected},
			{Path: "/f", Op: "write", Kind: KindProtected}, {Path: "/g", Op: "write", Kind: KindProtected},
		}, 0, []string{
			"[sandbox: /a is read-only (protected)]", "[sandbox: /b is read-only (protected)]",
			"[sandbox: /c is read-only (protected)]", "[sandbox: /d is read-only (protected)]",
			"[sandbox: /e is read-only (protected)]", "[sandbox: 2 more denied operations not shown]",
		}},
		{"more the record could not keep", ws, []Denial{{Path: "/a", Op: "write", Kind: KindProtected}}, 64,
			[]string{"[sandbox: /a is read-only (protected)]", "[sandbox: 64 more denied operations not shown]"}},
	}
	for _, c := range cases {
		if got := Markers(c.plan, c.denied, c.more); !slices.Equal(got, c.want) {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
}
