//go:build linux

package nsinit

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/conch-dev/conch/internal/proc"
	"github.com/conch-dev/conch/internal/sandbox"
)

// The denial record (docs/sandbox.md#the-denial-record): the sandbox's
// supervisor reports each operation it denied, with the thread that
// asked, before that thread resumes; the init charges it, by its
// ledger, to the commands that started the thread's process and sends
// it to the server as an opDenied event, ahead of anything the process
// does next (its exit included).

// maxRecorded bounds the distinct denials the init sends per command;
// past it, they are counted (More) in batches of moreBatch.
const (
	maxRecorded = 256
	moreBatch   = 64
)

// supervise starts the sandbox's supervisor, which Restrict prepared
// for plan on this thread, or which records the refused connects of a
// full-access plan with the network off (nothing without a plan, or on a
// host without it).
func (s *initState) supervise(plan *sandbox.Plan) error {
	if plan == nil {
		return nil
	}
	if err := sandbox.WatchNetwork(plan); err != nil {
		return fmt.Errorf("init: %w", err)
	}
	if _, err := sandbox.Supervise(plan, s.recordDenial); err != nil {
		return fmt.Errorf("init: %w", err)
	}
	return nil
}

// recordDenial charges d, denied to thread tid, to its commands.
func (s *initState) recordDenial(tid int, d sandbox.Denial) {
	pid := tgidOf(tid)
	info, err := proc.Stat(pid)
	if err != nil {
		return // gone: no command waits for its record
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	owners, ok := s.owners[keyOf(info)]
	if !ok {
		// Forked since the last scan: charge it now.
		if infos, err := proc.Scan(); err == nil {
			s.account(infos)
		}
		owners = s.owners[keyOf(info)]
	}
	key := d.Op + "\x00" + d.Kind + "\x00" + d.Path
	for _, c := range owners {
		if c.released {
			continue
		}
		if c.denied == nil {
			c.denied = make(map[string]bool)
		}
		switch {
		case c.denied[key]:
		case len(c.denied) < maxRecorded:
			c.denied[key] = true
			s.c.send(&message{Op: opDenied, Pid: c.pid, Denial: &d})
		default:
			if c.deniedMore++; c.deniedMore%moreBatch == 0 {
				s.c.send(&message{Op: opDenied, Pid: c.pid, More: moreBatch})
			}
		}
	}
}

// tgidOf is the process of thread tid.
func tgidOf(tid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(tid) + "/status")
	if err != nil {
		return tid
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "Tgid:"); ok {
			if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
				return n
			}
		}
	}
	return tid
}
