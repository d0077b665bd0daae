//go:build linux

package contained

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"

	"github.com/conch-dev/conch/internal/egress"
	"github.com/conch-dev/conch/internal/netpolicy"
	"github.com/conch-dev/conch/internal/nsinit"
	"github.com/conch-dev/conch/internal/sandbox"
	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/shell/local"
)

// Markers of the network policy's denials (docs/sandbox.md#network).
const (
	ownServerMarker = "[sandbox: connection to conch's own server refused]"
	moreMarkerFmt   = "[sandbox: %d more denied operations not shown]"
	maxNetMarkers   = 5
)

// network is the spawner's share of the network policy: the askers the
// tool layer lent each owner.
type network struct {
	mu     sync.Mutex
	askers map[string][]*loan // by owner, the latest last
}

type loan struct{ a shell.NetworkAsker }

var _ shell.NetworkAskers = (*spawner)(nil)

// LendNetworkAsker implements shell.NetworkAskers.
func (s *spawner) LendNetworkAsker(owner string, a shell.NetworkAsker) (release func()) {
	l := &loan{a: a}
	n := &s.net
	n.mu.Lock()
	if n.askers == nil {
		n.askers = make(map[string][]*loan)
	}
	n.askers[owner] = append(n.askers[owner], l)
	n.mu.Unlock()
	return func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		ls := n.askers[owner]
		if i := slices.Index(ls, l); i >= 0 {
			ls = slices.Delete(ls, i, i+1)
		}
		if len(ls) == 0 {
			delete(n.askers, owner)
		} else {
			n.askers[owner] = ls
		}
	}
}

// asker returns owner's current asker, nil when no call of the owner is
// in flight.
func (n *network) asker(owner string) shell.NetworkAsker {
	n.mu.Lock()
	defer n.mu.Unlock()
	if ls := n.askers[owner]; len(ls) > 0 {
		return ls[len(ls)-1].a
	}
	return nil
}

// initNetwork is the nsinit.Network of a plan whose network is
// filtered: the TUN device, the session's loopback listeners (conch's
// own ports, refused; allow_local's loopback ports, forwarded), and the
// resolver configuration. Nil for another plan.
func initNetwork(plan *sandbox.Plan) (*nsinit.Network, error) {
	if plan == nil || !plan.Filtered() {
		return nil, nil
	}
	rules, err := plan.Net.Compile()
	if err != nil {
		return nil, fmt.Errorf("contained: network: %w", err)
	}
	var listen []string
	for _, ap := range append(plan.Net.OwnLoopback(), rules.Loopback()...) {
		if s := ap.String(); !slices.Contains(listen, s) {
			listen = append(listen, s)
		}
	}
	return &nsinit.Network{TUN: true, Listen: listen, Resolv: egress.ResolvConf("/etc/resolv.conf")}, nil
}

// prepareEgress makes the egress stack of a session with plan beside
// its init's start (egress.Prepare), and returns how to wait for it: nil
// when plan's network is not filtered.
func (s *spawner) prepareEgress(owner string, plan *sandbox.Plan) func() (*egress.Session, error) {
	if plan == nil || !plan.Filtered() {
		return func() (*egress.Session, error) { return nil, nil }
	}
	type prepared struct {
		eg  *egress.Session
		err error
	}
	ch := make(chan prepared, 1)
	go func() {
		eg, err := egress.Prepare(&egress.Options{
			Policy: plan.Net,
			Asker:  func() shell.NetworkAsker { return s.net.asker(owner) },
		})
		ch <- prepared{eg, err}
	}()
	return func() (*egress.Session, error) {
		p := <-ch
		return p.eg, p.err
	}
}

// startEgress attaches the prepared egress to the network device and
// listeners the init made, which it takes (nil, nil when the session's
// network is not filtered).
func startEgress(in *nsinit.Init, prepared func() (*egress.Session, error)) (*egress.Session, error) {
	eg, err := prepared()
	if eg == nil || err != nil {
		return nil, err
	}
	n := in.TakeNetwork()
	if err := eg.Attach(n.TUN, n.Listeners); err != nil {
		return nil, err
	}
	return eg, nil
}

// narrowNetwork applies the network part of a project's narrowing.
func narrowNetwork(plan *sandbox.Plan, n *shell.SandboxNarrowing) (*sandbox.Plan, error) {
	if plan == nil || n == nil {
		return plan, nil
	}
	return plan.WithNetwork(netpolicy.Narrowing{Mode: netpolicy.Mode(n.Network), Allow: n.NetworkAllow, Deny: n.NetworkDeny, Ask: n.NetworkAsk})
}

// annotateNetwork adds to r the connections the owner's egress refused
// while c ran: a marker each (the same one once, at most maxNetMarkers,
// then how many more), and an entry each in r.Sandbox.Denied. Whatever
// c's exit code: a refused connection is named even when the command
// went on and exited 0. Denials are attributed by time: a connection
// refused while two commands of the owner ran is named in both results.
func (s *spawner) annotateNetwork(c local.Command, eg *egress.Session, r *shell.Result) {
	if eg == nil || c.Started.IsZero() {
		return
	}
	var markers []string
	for _, d := range eg.Denials(c.Started) {
		m := ownServerMarker
		if d.Reason != egress.ReasonOwnServer {
			m = "[sandbox: network access to " + net.JoinHostPort(d.Host, strconv.Itoa(d.Port)) + " denied (" + d.Reason + ")]"
		}
		if slices.Contains(markers, m) {
			continue
		}
		markers = append(markers, m)
		if r.Sandbox != nil {
			r.Sandbox.Denied = append(r.Sandbox.Denied, shell.SandboxDenial{Host: d.Host, Port: d.Port, Op: "connect", Reason: d.Reason})
		}
	}
	if len(markers) > maxNetMarkers {
		markers = append(markers[:maxNetMarkers], fmt.Sprintf(moreMarkerFmt, len(markers)-maxNetMarkers))
	}
	r.Notes = append(r.Notes, markers...)
}
