//go:build linux

package seccompnotify

import (
	"testing"

	"golang.org/x/sys/unix"
)

func run(t *testing.T, prog []unix.SockFilter, d Data) uint32 {
	t.Helper()
	r, err := Run(prog, d)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestProgram(t *testing.T) {
	const a1, a2 = 0xc000003e, 0x40000003
	abis := []ABI{
		{Arch: a1, NrLimit: 0x40000000, Rules: []Rule{
			{Nr: 2, Conds: []Cond{{Arg: 1, Mask: 3, Any: true}}, Action: Notify, Else: Allow},
			{Nr: 41, Conds: []Cond{{Arg: 0, Value: 1}, {Arg: 1, Mask: 0xf, Value: 2}}, Action: Errno(unix.EACCES), Else: Allow},
			{Nr: 83, Action: Notify},
		}},
		{Arch: a2, Rules: []Rule{{Nr: 102, Action: Errno(unix.EACCES)}, {Nr: 39, Action: Notify}}},
	}
	prog, err := Program(abis)
	if err != nil {
		t.Fatal(err)
	}
	eacces := uint32(Errno(unix.EACCES))
	for _, c := range []struct {
		d    Data
		want uint32
	}{
		{Data{Nr: 0, Arch: a1}, uint32(Allow)},
		{Data{Nr: 2, Arch: a1, Args: [6]uint64{0, 0}}, uint32(Allow)},
		{Data{Nr: 2, Arch: a1, Args: [6]uint64{0, 1}}, uint32(Notify)},
		{Data{Nr: 41, Arch: a1, Args: [6]uint64{1, 2}}, eacces},
		{Data{Nr: 41, Arch: a1, Args: [6]uint64{1, 0x80002}}, eacces},
		{Data{Nr: 41, Arch: a1, Args: [6]uint64{1, 1}}, uint32(Allow)},
		{Data{Nr: 41, Arch: a1, Args: [6]uint64{2, 2}}, uint32(Allow)},
		{Data{Nr: 83, Arch: a1}, uint32(Notify)},
		{Data{Nr: 0x40000002, Arch: a1}, uint32(Errno(unix.ENOSYS))},
		{Data{Nr: 39, Arch: a2}, uint32(Notify)},
		{Data{Nr: 102, Arch: a2}, eacces},
		{Data{Nr: 83, Arch: a2}, uint32(Allow)},
		{Data{Nr: 83, Arch: 0x1234}, uint32(Allow)},
	} {
		if got := run(t, prog, c.d); got != c.want {
			t.Errorf("nr %#x arch %#x args %v: %#x, want %#x", c.d.Nr, c.d.Arch, c.d.Args[:2], got, c.want)
		}
	}
}
