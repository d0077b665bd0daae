package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/conch-dev/conch/internal/audit"
)

const auditUsage = `Usage: conch audit verify [flags] [FILE]
       conch audit tail [-n N] [-f] [flags] [FILE]

Read conch's audit log (docs/operations.md): FILE, else the audit.path of
the configuration file, else $XDG_STATE_HOME/conch/audit.jsonl (or
~/.local/state/conch/audit.jsonl), with the rotated files beside it
(FILE.<seq>).

verify checks the hash chain through the whole set and prints each line
found altered, removed, reordered, duplicated or truncated, by its seq.
Exit status: 0 the chain holds, 1 it does not, 2 the files cannot be
read or a usage error.

tail prints the last N lines (default 10) for a person, one event a
line; -f then prints each new line as it is written, across rotations,
until interrupted.

Flags:
`

// auditCommand is `conch audit`.
func auditCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "verify" && args[0] != "tail") {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help" || args[0] == "help") {
			fmt.Fprint(stdout, auditUsage)
			return 0
		}
		fmt.Fprint(stderr, auditUsage)
		return exitUsage
	}
	verb := args[0]
	fs := flag.NewFlagSet("conch audit "+verb, flag.ContinueOnError)
	var o opsConfig
	o.addFlags(fs)
	n := fs.Int("n", 10, "tail: print the last `N` lines")
	follow := fs.Bool("f", false, "tail: then print new lines as they are written, until interrupted")
	if _, code, ok := parseFlags(fs, args[1:], auditUsage, stdout, stderr); !ok {
		return code
	}
	path := o.auditPath.v
	switch fs.NArg() {
	case 0:
	case 1:
		path = fs.Arg(0)
	default:
		fmt.Fprintf(stderr, "conch audit %s: more than one FILE\n", verb)
		return exitUsage
	}
	if path == auditOff {
		fmt.Fprintf(stderr, "conch audit %s: the audit log is off (audit.path = \"off\"); name a FILE\n", verb)
		return exitUsage
	}
	if verb == "verify" {
		return auditVerify(path, stdout, stderr)
	}
	if *n < 0 {
		fmt.Fprintf(stderr, "conch audit tail: -n must be zero or more\n")
		return exitUsage
	}
	return auditTail(ctx, path, *n, *follow, stdout, stderr)
}

func auditVerify(path string, stdout, stderr io.Writer) int {
	r, err := audit.Verify(path)
	if err != nil {
		fmt.Fprintf(stderr, "conch audit verify: %v\n", err)
		return exitUsage
	}
	for _, p := range r.Problems {
		fmt.Fprintln(stdout, p)
	}
	files := make([]string, len(r.Files))
	for i, f := range r.Files {
		files[i] = filepath.Base(f)
	}
	where := fmt.Sprintf("%d lines, seq %d to %d, in %s", r.Lines, r.First, r.Last, strings.Join(files, ", "))
	if r.Lines == 0 {
		where = "no lines, in " + strings.Join(files, ", ")
	}
	if r.Partial {
		where += fmt.Sprintf(" (the set starts at seq %d: the files before it are not there)", r.First)
	}
	if !r.OK() {
		fmt.Fprintf(stdout, "the audit log does not verify: %d problems; %s\n", len(r.Problems), where)
		return 1
	}
	fmt.Fprintf(stdout, "the audit log verifies: %s\n", where)
	return 0
}

func auditTail(ctx context.Context, path string, n int, follow bool, stdout, stderr io.Writer) int {
	lines, end, err := audit.TailAt(path, n)
	if err != nil {
		fmt.Fprintf(stderr, "conch audit tail: %v\n", err)
		return exitUsage
	}
	for _, l := range lines {
		fmt.Fprintln(stdout, audit.Format(l))
	}
	if !follow {
		return 0
	}
	// From where the last lines ended: a line written meanwhile shows.
	err = audit.FollowFrom(ctx, path, end, 200*time.Millisecond, func(l []byte) error {
		_, err := fmt.Fprintln(stdout, audit.Format(l))
		return err
	})
	if err != nil {
		fmt.Fprintf(stderr, "conch audit tail: %v\n", err)
		return 1
	}
	return 0
}
