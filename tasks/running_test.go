package tasks

import "testing"

// TestRunning counts the running and stopping tasks of every owner, and
// lets a settled one go.
func TestRunning(t *testing.T) {
	r := newRuntime(t, nil)
	if n := r.Running(); n != 0 {
		t.Fatalf("Running() = %d with no task", n)
	}
	h1, i1 := startManual(t, r, "a", "bash", "one")
	startManual(t, r, "a", "bash", "two")
	h3, _ := startManual(t, r, "b", "bash", "three")
	if n := r.Running(); n != 3 {
		t.Fatalf("Running() = %d, want 3", n)
	}
	if _, _, err := r.Kill("a", i1.ID, "stop"); err != nil {
		t.Fatal(err)
	}
	if n := r.Running(); n != 3 {
		t.Fatalf("Running() = %d with one task stopping, want 3", n)
	}
	h1.finish(sigterm)
	settle(t, r, "a", i1.ID)
	h3.finish(exit0)
	settle(t, r, "b", "bash-3")
	if n := r.Running(); n != 1 {
		t.Fatalf("Running() = %d after two settled, want 1", n)
	}
}
