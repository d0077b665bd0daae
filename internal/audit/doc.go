// Package audit keeps conch's audit log: one JSON line per event of
// package ops, hash-chained, redacted and rotated (docs/operations.md#the-audit-log).
//
// # A line
//
//	{"time":"2026-07-01T12:00:00.000001Z","seq":7,"prev":"9f86…","owner":"s1","event":"call","tool":"bash","command":"ls"}
//
// time is UTC with microseconds; seq counts the lines of the chain from 1;
// prev is the SHA-256, in hex, of the previous line's bytes without its
// newline ("" for seq 1); owner is the session; event and the fields after
// it are the event's JSON form (ops.AppendFields). Every free-text value
// passes through envpolicy.Redact first, so a token typed into a command
// is written as [redacted]; no event carries an environment.
//
// # Rotation and the chain
//
// A line that would take the file past MaxBytes first moves the file to
// "<path>.<seq of its first line>" and starts a new one; its first line
// chains to the last line of the moved file, so the chain runs through the
// whole set. Rotated files are kept: removing old ones is the operator's
// choice, and Verify accepts a set that starts at a rotated file whose
// name says where it starts.
//
// # Writers
//
// Record queues the event and returns; one goroutine per Log writes the
// queue in order, all that is waiting at once with one write(2), so the
// caller pays a channel send (a full queue makes it wait: no event is
// dropped for being too many). Several processes (two servers of one
// user) share one file and one chain: each write happens under an
// exclusive flock of "<path>.lock", after re-reading the file's last line
// when another process wrote or rotated since. The file is opened
// O_APPEND with mode 0600 and is not fsynced: Close writes everything
// queued; a SIGKILLed conch loses what was still queued (microseconds'
// worth), a crashed machine may lose the last lines.
//
// # Failure
//
// Nothing a caller does waits on the disk or fails because of it: a line
// that cannot be written is reported to the Logger (the first failure,
// then at most once a minute, and the recovery), counted (Failures), and
// the next write starts again from the file as it is. A line cut short by
// a full disk or a crash is left as it is and Verify reports it; the next
// line starts on a line of its own and chains to it.
package audit
