//go:build cgo

package prestart

/*
#include <stdlib.h>

extern int conch_early_pid, conch_early_fd, conch_early_execd, conch_early_netns, conch_early_tried;
int conch_early_wanted(int argc, char **argv, int (*tun)(void), int *netns);

static int conch_test_tun_yes(void) { return 1; }
static int conch_test_tun_no(void) { return 0; }

static int conch_test_wanted(int argc, char **argv, int usable, int *netns) {
	return conch_early_wanted(argc, argv, usable ? conch_test_tun_yes : conch_test_tun_no, netns);
}
*/
import "C"

import (
	"os"
	"unsafe"
)

// haveEarly: whether early_linux.c is built in.
const haveEarly = true

// early returns the init the constructor in early_linux.c started
// before this process's Go runtime (nil: none), and whether it tried
// (then the Go start does not try again: it would fail the same way).
func early() (p *earlyProcess, tried bool) {
	if C.conch_early_pid <= 0 {
		return nil, C.conch_early_tried != 0
	}
	return &earlyProcess{
		pid:   int(C.conch_early_pid),
		conn:  os.NewFile(uintptr(C.conch_early_fd), "nsinit-server"),
		execd: int(C.conch_early_execd),
		netNS: C.conch_early_netns != 0,
	}, true
}

// earlyWanted is early_linux.c's reading of a command line (args
// without the program's name), with a TUN device that opens or not: for
// TestEarlyWanted.
func earlyWanted(args []string, tun bool) (netNS, ok bool) {
	argv := make([]*C.char, len(args)+1)
	argv[0] = C.CString("conch")
	for i, a := range args {
		argv[i+1] = C.CString(a)
	}
	defer func() {
		for _, p := range argv {
			C.free(unsafe.Pointer(p))
		}
	}()
	usable := C.int(0)
	if tun {
		usable = 1
	}
	var netns C.int
	r := C.conch_test_wanted(C.int(len(argv)), (**C.char)(unsafe.Pointer(&argv[0])), usable, &netns)
	return netns != 0, r != 0
}
