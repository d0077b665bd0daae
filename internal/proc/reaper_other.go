//go:build !linux

package proc

import "os/exec"

// StartCmd starts cmd. Elsewhere than Linux conch reaps no orphans, so
// there is nothing to claim its pid from (see the Linux StartCmd).
func StartCmd(cmd *exec.Cmd) error { return cmd.Start() }

// WaitCmd waits for a cmd started by StartCmd.
func WaitCmd(cmd *exec.Cmd) error { return cmd.Wait() }

// SpareDaemons does nothing here: without a child subreaper nothing is
// re-parented to this process.
func SpareDaemons(names ...string) {}
