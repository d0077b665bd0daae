//go:build linux

package proc

import (
	"context"
	"errors"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// KillWait bounds how long Terminate and Tracker.KillAll wait for SIGKILLed
// processes to go. SIGKILL cannot be caught, so only a process stuck in
// the kernel (uninterruptible sleep on a dead NFS server, say) outlasts
// it.
const KillWait = 5 * time.Second

const (
	firstPoll = time.Millisecond     // most cooperative groups are gone by then
	maxPoll   = 8 * time.Millisecond // the slowest rate at which we look again
)

// GroupAlive reports whether any member of process group pgid is alive,
// that is neither a zombie nor dead. A group whose only members are
// zombies counts as gone: they run no code, and their parent will reap
// them.
//
// Most calls are answered without listing /proc: kill(-pgid, 0) failing
// with ESRCH means no member at all, zombies included, and a live leader
// (pid pgid, still in group pgid) means the group is alive. Otherwise
// (the leader exited, or is a zombie, while the kernel still knows the
// group) the group's possible members are looked at; when a look finds
// none, a second one confirms, because a member forked during the first
// look by a process that then exited is missing from it.
//
// When the leader is our zombie child and led its own session, and this
// process is a subreaper (BecomeSubreaper), the look is a walk of our
// descendants (groupAliveBelow): every member left is one of them. Else
// it is a scan of /proc, which concurrent calls share: each call's scan
// starts after the call, but one scan answers every call that waits for
// it. A scan reads every process, a thousand when a thousand commands
// run; on a loaded machine a burst of kills then waited seconds for them
// (TestConcurrentSessions' soak).
func GroupAlive(pgid int) bool {
	if pgid <= 0 {
		return false
	}
	if err := unix.Kill(-pgid, 0); err == unix.ESRCH {
		return false
	}
	p, err := Stat(pgid)
	if err == nil && p.Pgid == pgid && p.Alive() {
		return true
	}
	walk := err == nil && p.State == 'Z' && p.Sid == pgid && p.PPid == os.Getpid() && subreaper.Load()
	for range 2 {
		if err := unix.Kill(-pgid, 0); err == unix.ESRCH {
			return false
		}
		alive := true
		if walk {
			alive = groupAliveBelow(pgid)
		} else {
			groupScans.do(func(s *snapshot) {
				// /proc unreadable: we cannot prove the group gone.
				alive = s.err != nil || s.groupAlive(pgid)
			})
		}
		if alive {
			return true
		}
	}
	return false
}

// groupAliveBelow reports whether one of our descendants is a live member
// of group pgid, whose leader led session pgid and is our zombie child,
// while this process is a subreaper: every process the leader started
// was then re-parented to us (the main thread, see reparented) or is
// below one that was, members of the group included, even one whose
// parent left the session (a process that forked it and then called
// setsid). The subtrees that cannot hold a member are skipped: the
// claimed children (other commands' shells, each in a session of its
// own) and the children in our own session (not started by the leader).
// A process that cannot be read counts as a member: the group cannot be
// proved gone.
func groupAliveBelow(pgid int) bool {
	self := os.Getpid()
	selfSid, _ := unix.Getsid(0)
	queue, err := reparented()
	if err != nil {
		return true
	}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		if isClaimed(pid) {
			continue
		}
		p, err := Stat(pid)
		switch {
		case errors.Is(err, ErrNotExist):
			continue
		case err != nil:
			return true
		case !p.Alive(): // a zombie has no children left
			continue
		case p.PPid == self && p.Sid == selfSid:
			continue
		case p.Pgid == pgid:
			return true
		}
		kids, err := children(pid)
		if err != nil {
			return true
		}
		queue = append(queue, kids...)
	}
	return false
}

// Terminate stops process group pgid: SIGTERM to the group, a wait of at
// most grace for it to go, then SIGKILL to the group, and a wait (at most
// KillWait) until it is gone. It reports whether the group was still seen
// alive when grace ran out.
//
// The group is looked at about 1 ms after each signal and then at most
// every 8 ms, so a cooperative group costs a few milliseconds, not grace.
// The SIGKILL is sent even when the group was seen gone: a scan of /proc
// cannot prove a group empty (a process that forks and exits in a loop is
// never seen by one), and the caller's hold on pgid makes the signal safe.
// A group whose only members are zombies counts as gone.
//
// pgid must be the id of a group whose leader the caller started and has
// not reaped yet: the leader's zombie holds the number, so it cannot name
// another group until the caller reaps it. Terminate refuses pgid ≤ 1
// (kill(-1) would signal every process) and this process's own group, and
// then returns false without signalling.
func Terminate(pgid int, grace time.Duration) (escalated bool) {
	return TerminateContext(context.Background(), pgid, grace)
}

// TerminateContext is Terminate with a way to hurry: when ctx is done
// during the grace period, the group is SIGKILLed at once instead of at
// the end of grace. The wait after SIGKILL is bounded by KillWait and does
// not watch ctx.
func TerminateContext(ctx context.Context, pgid int, grace time.Duration) (escalated bool) {
	if pgid <= 1 || pgid == unix.Getpgrp() {
		return false
	}
	if err := unix.Kill(-pgid, unix.SIGTERM); err != nil {
		// ESRCH: the group is gone (not even a zombie left). EPERM: not
		// ours to stop.
		return false
	}
	gone := waitGroupGone(ctx, pgid, grace)
	if !gone && ctx.Err() != nil {
		// Hurried: whether the group still lives is asked before the
		// SIGKILL, not after it (the kernel may have taken it by then,
		// and an escalation read as none).
		gone = !GroupAlive(pgid)
	}
	if err := unix.Kill(-pgid, unix.SIGKILL); err != nil {
		return false
	}
	if gone {
		return false
	}
	waitGroupGone(context.Background(), pgid, KillWait)
	return true
}

// waitGroupGone polls GroupAlive with a short backoff until the group is
// gone (true), d has passed or ctx is done (false).
func waitGroupGone(ctx context.Context, pgid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	delay := firstPoll
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	for {
		if wait := min(delay, time.Until(deadline)); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-ctx.Done():
				return false
			}
		}
		if !GroupAlive(pgid) {
			return true
		}
		if !time.Now().Before(deadline) {
			return false
		}
		delay = min(2*delay, maxPoll)
	}
}
