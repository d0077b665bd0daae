package netpolicy

import (
	"errors"
	"net/netip"
	"testing"
)

func TestPatterns(t *testing.T) {
	for _, c := range []struct {
		pattern, name string
		addr          string
		port          int
		want          bool
	}{
		{"example.com", "example.com", "", 443, true},
		{"example.com", "EXAMPLE.com.", "", 22, true},
		{"example.com", "www.example.com", "", 443, false},
		{"*.example.com", "www.example.com", "", 443, true},
		{"*.example.com", "a.b.example.com", "", 443, true},
		{"*.example.com", "example.com", "", 443, false},
		{"*.example.com", "badexample.com", "", 443, false},
		{"example.com:443", "example.com", "", 443, true},
		{"example.com:443", "example.com", "", 80, false},
		{"10.0.0.0/8", "", "10.1.2.3", 80, true},
		{"10.0.0.0/8", "", "11.1.2.3", 80, false},
		{"10.0.0.5:5432", "", "10.0.0.5", 5432, true},
		{"10.0.0.5:5432", "", "10.0.0.5", 5433, false},
		{"[::1]:5432", "", "::1", 5432, true},
		{"fd00::/8", "", "fd12::1", 1, true},
		{"169.254.169.254", "", "::ffff:169.254.169.254", 80, true},
	} {
		p, err := ParsePattern(c.pattern)
		if err != nil {
			t.Fatalf("ParsePattern(%q): %v", c.pattern, err)
		}
		var got bool
		if c.addr != "" {
			got = p.MatchAddr(netip.MustParseAddr(c.addr), c.port)
		} else {
			got = p.MatchName(c.name, c.port)
		}
		if got != c.want {
			t.Errorf("%q matches %q%s port %d: %v, want %v", c.pattern, c.name, c.addr, c.port, got, c.want)
		}
	}
	for _, bad := range []string{"", " a.com", "a b", "a.com:0", "a.com:99999", "[::1", "*.", "exa$mple.com", "fe80::1%eth0"} {
		if _, err := ParsePattern(bad); err == nil {
			t.Errorf("ParsePattern(%q) accepted", bad)
		}
	}
}

func TestClassify(t *testing.T) {
	own := netip.MustParseAddr("192.0.2.77") // stands for an interface's address
	hostOwn := func(a netip.Addr) bool { return a == own }
	for addr, want := range map[string]string{
		"169.254.169.254":        ReasonMetadata,
		"::ffff:169.254.169.254": ReasonMetadata,
		"64:ff9b::a9fe:a9fe":     ReasonMetadata, // NAT64 of 169.254.169.254
		"fd00:ec2::254":          ReasonMetadata,
		"168.63.129.16":          ReasonMetadata,
		"127.0.0.1":              ReasonHostOwn,
		"127.1.2.3":              ReasonHostOwn,
		"::1":                    ReasonHostOwn,
		"0.0.0.0":                ReasonHostOwn,
		"192.0.2.77":             ReasonHostOwn,
		"10.1.2.3":               ReasonPrivate,
		"172.16.0.1":             ReasonPrivate,
		"192.168.1.1":            ReasonPrivate,
		"100.64.0.1":             ReasonPrivate,
		"169.254.1.1":            ReasonPrivate,
		"fe80::1":                ReasonPrivate,
		"fc00::1":                ReasonPrivate,
		"224.0.0.1":              ReasonPrivate,
		"255.255.255.255":        ReasonPrivate,
		"198.18.0.5":             ReasonPrivate,
		"64:ff9b::a01:203":       ReasonPrivate, // NAT64 of 10.1.2.3
		"203.0.113.10":           "",
		"1.1.1.1":                "",
		"2606:4700::1111":        "",
	} {
		if got := Classify(netip.MustParseAddr(addr), hostOwn); got != want {
			t.Errorf("Classify(%s) = %q, want %q", addr, got, want)
		}
	}
}

func TestRules(t *testing.T) {
	r, err := Policy{Mode: Allowlist, Allow: []string{"*.github.com", "203.0.113.0/24"}, Deny: []string{"gist.github.com", "*.github.com:22"},
		AllowLocal: []string{"127.0.0.1:5432", "localhost:6379", "10.9.0.0/16"}}.Compile()
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := r.DenyName("gist.github.com", 443); !ok || p != "gist.github.com" {
		t.Errorf("DenyName(gist) = %q %v", p, ok)
	}
	if _, ok := r.DenyName("api.github.com", 0); ok {
		t.Errorf("a port-bound deny refuses the name at resolution")
	}
	if p, ok := r.DenyName("api.github.com", 22); !ok || p != "*.github.com:22" {
		t.Errorf("DenyName(api:22) = %q %v", p, ok)
	}
	if !r.AllowName("api.github.com", 443) || r.AllowName("github.com", 443) {
		t.Errorf("AllowName")
	}
	if !r.AllowAddr(netip.MustParseAddr("203.0.113.9"), 80) {
		t.Errorf("AllowAddr")
	}
	if got := r.Refused(netip.MustParseAddr("127.0.0.1"), 5432, nil); got != "" {
		t.Errorf("allow_local 127.0.0.1:5432 refused: %s", got)
	}
	if got := r.Refused(netip.MustParseAddr("127.0.0.1"), 5433, nil); got != ReasonHostOwn {
		t.Errorf("127.0.0.1:5433 = %q", got)
	}
	if got := r.Refused(netip.MustParseAddr("10.9.1.1"), 22, nil); got != "" {
		t.Errorf("allow_local CIDR refused: %s", got)
	}
	if got := r.Loopback(); len(got) != 3 {
		t.Errorf("Loopback() = %v, want 127.0.0.1:5432, 127.0.0.1:6379, [::1]:6379", got)
	}
	for _, bad := range []Policy{
		{Mode: "wide"},
		{Mode: Public, AllowLocal: []string{"127.0.0.1"}},
		{Mode: Public, AllowLocal: []string{"db.internal:5432"}},
		{Mode: Public, Deny: []string{"x y"}},
	} {
		if _, err := bad.Compile(); err == nil {
			t.Errorf("Compile(%+v) accepted", bad)
		}
	}
	if !(Policy{Mode: Allowlist}).Asks() || (Policy{Mode: Public}).Asks() {
		t.Errorf("Asks")
	}
}

func TestNarrow(t *testing.T) {
	no, yes := false, true
	pub := Policy{Mode: Public, Deny: []string{"a.com"}}
	q, err := pub.Narrow(Narrowing{Mode: Allowlist, Allow: []string{"b.com"}, Deny: []string{"c.com"}})
	if err != nil || q.Mode != Allowlist || len(q.Allow) != 1 || len(q.Deny) != 2 || !q.Asks() {
		t.Errorf("public to allowlist = %+v, %v", q, err)
	}
	if len(pub.Deny) != 1 {
		t.Errorf("Narrow changed its receiver")
	}
	al := Policy{Mode: Allowlist, Allow: []string{"b.com"}, Ask: &no}
	for _, n := range []Narrowing{
		{Mode: Public},
		{Mode: On},
		{Allow: []string{"evil.com"}},
		{Ask: &yes},
	} {
		if _, err := al.Narrow(n); !errors.Is(err, ErrWiden) {
			t.Errorf("Narrow(%+v) = %v, want ErrWiden", n, err)
		}
	}
	if q, err := al.Narrow(Narrowing{Mode: Off}); err != nil || q.Mode != Off {
		t.Errorf("to off: %+v %v", q, err)
	}
	if q, err := (Policy{Mode: On}).Narrow(Narrowing{Mode: Public}); err != nil || q.Mode != Public {
		t.Errorf("on to public: %+v %v", q, err)
	}
}
