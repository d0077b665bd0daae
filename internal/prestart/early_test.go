//go:build linux

package prestart

import "testing"

// TestEarlyWanted holds early_linux.c's reading of a command line to
// this package's (TestWanted's cases and the edges of a C parser: a
// flag's last word without its value, an empty value, dashes), with and
// without a TUN device that opens.
func TestEarlyWanted(t *testing.T) {
	if !haveEarly {
		t.Skip("built without cgo: no constructor starts an init")
	}
	cases := [][]string{
		{"run", "--", "true"},
		{"run", "true"},
		{"run", "--json", "--cwd", "/tmp", "--", "ls"},
		{"run", "--containment", "require", "--", "true"},
		{"run", "--network", "off", "--", "true"},
		{"run", "--network=allowlist", "--", "true"},
		{"run", "--network", "on", "--", "true"},
		{"run", "-network=on", "--", "true"},
		{"run", "--network=", "--", "true"},
		{"run", "--network"},
		{"run", "--network", "public", "--", "true"},
		{"run", "--sandbox", "full-access", "--", "true"},
		{"run", "--sandbox=full-access", "--network", "public", "--", "true"},
		{"run", "--sandbox", "full-access", "--network", "on", "true"},
		{"run", "--containment", "off", "--", "true"},
		{"run", "--containment=off", "--", "true"},
		{"run", "---containment=off", "true"},
		{"run", "-containment", "off", "true"},
		{"run", "--containment=offx", "true"},
		{"run", "--containmentx=off", "true"},
		{"run", "--provider", "local", "--", "true"},
		{"run", "--provider=local", "--", "true"},
		{"run", "--provider", "contained", "--", "true"},
		{"run", "--help"},
		{"run", "-h", "--", "true"},
		{"run", "--h=1", "true"},
		{"run", "-", "true"},
		{"run", "--", "--containment=off"},
		{"run", "--", "conch", "run", "--containment", "off", "--", "true"},
		{"run", "echo", "--containment", "off"},
		{"run", "--workdir", "--containment", "true"},
		{"run"},
		{"serve"},
		{"Run", "true"},
		{HelperArg},
		{},
	}
	defer func(f func() bool) { tunUsable = f }(tunUsable)
	for _, usable := range []bool{true, false} {
		tunUsable = func() bool { return usable }
		for _, args := range cases {
			wantNet, wantOK := wanted(args)
			if netNS, ok := earlyWanted(args, usable); netNS != wantNet || ok != wantOK {
				t.Errorf("TUN usable %v: early_linux.c reads %q as netNS %v, ok %v; prestart.wanted as %v, %v", usable, args, netNS, ok, wantNet, wantOK)
			}
		}
	}
}
