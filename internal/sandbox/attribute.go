package sandbox

import (
	"fmt"
	"strings"
)

// Denial is one operation the sandbox denied a command, as the
// supervisor recorded it (docs/sandbox.md#the-denial-record): Op is
// "write", "read" or "connect"; Path the path it named ("@name" for an
// abstract unix socket; empty for a network connect); Kind why:
// KindOutside, KindProtected, KindSocket, KindNetwork or KindRead.
type Denial struct {
	Path string `json:"path,omitempty"`
	Op   string `json:"op"`
	Kind string `json:"kind"`
}

// Kinds of Denial.
const (
	KindOutside   = "outside"   // a write outside the writable roots
	KindProtected = "protected" // a protected path, or a git file that could make git run code
	KindSocket    = "socket"    // a unix socket neither the session's nor listed
	KindNetwork   = "network"   // a connect while the network is off
	KindRead      = "read"      // a read of a deny_read path
)

// DegradedNote is the sentence the bash tool's description gains when the
// default mode runs without a file sandbox because the host cannot
// enforce it.
const DegradedNote = "Commands run without a file sandbox on this host."

// UnenforcedFiles begins what Restrict reports when the host has no file
// sandbox (no Landlock, and no supervisor to judge writes instead): the
// case DegradedNote is for.
const UnenforcedFiles = "file sandbox"

// MaxMarkers is the most denial markers one result shows; a line says how
// many more there were.
const MaxMarkers = 5

// Markers, each a line of its own in a result (CONTRACT 11, 17.2).
const (
	markerWrite     = "[sandbox: write to %s denied under %s mode; writable: %s]"
	markerProtected = "[sandbox: %s is read-only (protected)]"
	markerSocket    = "[sandbox: connect to unix socket %s denied under %s mode]"
	markerNetwork   = "[sandbox: network is off for commands]"
	markerGeneric   = "[sandbox: file access denied under %s mode]"
	markerMore      = "[sandbox: %d more denied operations not shown]"
)

// Marker is the marker line of d under plan.
func Marker(plan *Plan, d Denial) string {
	switch d.Kind {
	case KindOutside:
		return fmt.Sprintf(markerWrite, d.Path, plan.Mode, strings.Join(plan.Writable, ", "))
	case KindProtected:
		return fmt.Sprintf(markerProtected, d.Path)
	case KindSocket:
		return fmt.Sprintf(markerSocket, d.Path, plan.Mode)
	case KindNetwork:
		return markerNetwork
	}
	return fmt.Sprintf(markerGeneric, plan.Mode)
}

// Markers are the marker lines of denied, a command's record in the order
// the operations were denied, each marker once: at most MaxMarkers, then
// one saying how many more denied operations there were (more counts
// those the record could not keep).
func Markers(plan *Plan, denied []Denial, more int) []string {
	var out []string
	seen := make(map[string]bool)
	hidden := more
	for _, d := range denied {
		m := Marker(plan, d)
		if seen[m] {
			continue
		}
		seen[m] = true
		if len(out) < MaxMarkers {
			out = append(out, m)
		} else {
			hidden++
		}
	}
	if hidden > 0 {
		out = append(out, fmt.Sprintf(markerMore, hidden))
	}
	return out
}
