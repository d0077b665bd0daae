//go:build linux

package sandbox

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/conch-dev/conch/internal/testutil"
)

// TestJournalless: the cache layer's overlays are volatile except on an
// ext4 without a journal. Each kind of file system is made and mounted
// here (a loop device), as root.
func TestJournalless(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root: mounts ext4 file systems on loop devices")
	}
	for _, tc := range []struct {
		name string
		opts []string
		want bool
	}{
		{"ext4", nil, false},
		{"ext4 without a journal", []string{"-O", "^has_journal"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mnt := testutil.MountExt4(t, 32<<20, tc.opts...)
			layer := filepath.Join(mnt, "layer")
			if err := os.Mkdir(layer, 0o700); err != nil {
				t.Fatal(err)
			}
			if got := Journalless(layer); got != tc.want {
				t.Errorf("Journalless on %s: %v, want %v", tc.name, got, tc.want)
			}
		})
	}
	if Journalless("/proc") {
		t.Error("Journalless on proc: true")
	}
}
