//go:build linux

package prestart

import "testing"

// TestWanted pins which command lines start an init ahead, and with
// which network namespace: a conch run on the defaults does, one that
// turns containment off does not.
func TestWanted(t *testing.T) {
	usable := true
	tunUsable = func() bool { return usable }
	for _, tc := range []struct {
		args      []string
		ok, netNS bool
	}{
		{[]string{"run", "--", "true"}, true, true},
		{[]string{"run", "true"}, true, true},
		{[]string{"run", "--json", "--cwd", "/tmp", "--", "ls"}, true, true},
		{[]string{"run", "--containment", "require", "--", "true"}, true, true},
		{[]string{"run", "--network", "off", "--", "true"}, true, true},
		{[]string{"run", "--network=allowlist", "--", "true"}, true, true},
		{[]string{"run", "--network", "on", "--", "true"}, true, false},
		{[]string{"run", "-network=on", "--", "true"}, true, false},
		{[]string{"run", "--sandbox", "full-access", "--", "true"}, true, false},
		{[]string{"run", "--sandbox", "full-access", "--network", "public", "--", "true"}, true, true},
		{[]string{"run", "--containment", "off", "--", "true"}, false, false},
		{[]string{"run", "--containment=off", "--", "true"}, false, false},
		{[]string{"run", "-containment", "off", "true"}, false, false},
		{[]string{"run", "--provider", "local", "--", "true"}, false, false},
		{[]string{"run", "--provider=local", "--", "true"}, false, false},
		{[]string{"run", "--help"}, false, false},
		{[]string{"run", "-h", "--", "true"}, false, false},
		// The command's own words are not conch's flags.
		{[]string{"run", "--", "conch", "run", "--containment", "off", "--", "true"}, true, true},
		{[]string{"run", "echo", "--containment", "off"}, true, true},
		{[]string{"run"}, false, false},
		{[]string{"serve"}, false, false},
		{[]string{HelperArg}, false, false},
		{nil, false, false},
	} {
		usable = true
		netNS, ok := wanted(tc.args)
		if ok != tc.ok || netNS != tc.netNS {
			t.Errorf("wanted(%q) = netNS %v, ok %v; want %v, %v", tc.args, netNS, ok, tc.netNS, tc.ok)
		}
	}
	// Without a usable TUN device the default network runs as "on";
	// one given explicitly refuses to start (the init is closed then).
	usable = false
	for _, tc := range []struct {
		args  []string
		netNS bool
	}{
		{[]string{"run", "--", "true"}, false},
		{[]string{"run", "--network", "off", "--", "true"}, true},
		{[]string{"run", "--network", "public", "--", "true"}, true},
	} {
		if netNS, ok := wanted(tc.args); !ok || netNS != tc.netNS {
			t.Errorf("without a TUN device, wanted(%q) = netNS %v, ok %v; want %v, true", tc.args, netNS, ok, tc.netNS)
		}
	}
}
