//go:build linux

package egress

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sync"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/link/fdbased"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv6"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/udp"

	"github.com/conch-dev/conch/internal/netpolicy"
	"github.com/conch-dev/conch/shell"
)

// Resolver resolves the names commands ask for (*net.Resolver is one).
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Options configure a Session. The zero value is usable with a Policy.
type Options struct {
	// Policy is the session's network policy, public or allowlist.
	Policy netpolicy.Policy
	// Asker returns who answers the session's questions now (nil: no
	// one, and a question's connection is refused): the asker the tool
	// layer lent for a call in flight (shell.NetworkAskers).
	Asker func() shell.NetworkAsker
	// Resolver resolves names; nil means net.DefaultResolver (the host's
	// resolver configuration).
	Resolver Resolver
	// MTU is the device's (0: the init's default, 65520).
	MTU int
	// AskTimeout bounds a question to the user (0: 10 minutes).
	AskTimeout time.Duration
	// Log receives the session's network errors at debug level; nil
	// discards them.
	Log *slog.Logger
}

// Denial is one connection the policy refused.
type Denial struct {
	Host   string // the name the command asked for, else the address
	Port   int
	Reason string // a netpolicy reason, or ReasonOwnServer
	At     time.Time
}

// ReasonOwnServer is the Reason of a connection to conch's own server
// (its marker is `[sandbox: connection to conch's own server refused]`).
const ReasonOwnServer = "conch's own server"

// maxDenials bounds the denials a session keeps; the oldest go first.
const maxDenials = 512

// maxUDPFlows bounds the UDP flows (DNS queries included) a session has
// open at once; past it new flows are dropped.
const maxUDPFlows = 512

// Session is one session's egress: the stack on its TUN device, its DNS,
// its answers and its record of denials. Its methods are safe for
// concurrent use.
type Session struct {
	opts  Options
	rules *netpolicy.Rules
	res   Resolver
	names *names
	stack *stack.Stack
	tun   *os.File

	ctx    context.Context // ends with Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // every goroutine of the session

	mu       sync.Mutex
	closed   bool
	conns    map[net.Conn]struct{} // open connections, closed by Close
	udpFlows int
	granted  map[string]bool // hosts allowed for the session
	declined map[string]bool // hosts the user refused for the session
	asking   map[string]*question
	cache    map[string]resolved
	denials  []Denial

	hostAddrs hostAddrs
}

// resolved is the server's latest answer for a name.
type resolved struct {
	addrs []netip.Addr
	err   error
	at    time.Time
}

// question is an answer being awaited; every connection to the same
// host and port waits for the same one.
type question struct {
	done chan struct{}
	a    shell.NetworkAnswer
	err  error
}

// New starts a session's stack on tun, the TUN device of the session's
// init (it takes tun), and serves listeners, the loopback listeners the
// init opened inside the namespace by address (it takes them):
// allow_local's, forwarded to the same address and port on the host, and
// those of conch's own ports (Options.Own), whose connections are
// refused. It is Prepare, then Attach.
func New(tun *os.File, listeners map[string]*os.File, opts *Options) (*Session, error) {
	s, err := Prepare(opts)
	if err != nil {
		closeAll(tun, listeners)
		return nil, err
	}
	if err := s.Attach(tun, listeners); err != nil {
		return nil, err
	}
	return s, nil
}

// Prepare makes a session's stack before its device exists: gVisor's
// stack and its handlers, about a millisecond of CPU, which a server
// spends beside its init's set-up rather than after it, on the path of
// the session's first command (docs/sandbox.md#the-egress-stack-is-made-beside-the-inits-set-up).
// Attach gives it the device; Close drops it unattached.
func Prepare(opts *Options) (*Session, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if !o.Policy.Mode.Filtered() {
		return nil, fmt.Errorf("egress: mode %q is not a filtered mode", o.Policy.Mode)
	}
	rules, err := o.Policy.Compile()
	if err != nil {
		return nil, fmt.Errorf("egress: %w", err)
	}
	if o.Resolver == nil {
		o.Resolver = net.DefaultResolver
	}
	if o.MTU <= 0 {
		o.MTU = 65520
	}
	if o.AskTimeout <= 0 {
		o.AskTimeout = 10 * time.Minute
	}
	s := &Session{
		opts: o, rules: rules, res: o.Resolver, names: newNames(),
		conns: make(map[net.Conn]struct{}), granted: make(map[string]bool), declined: make(map[string]bool),
		asking: make(map[string]*question), cache: make(map[string]resolved),
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.stack = newStack(s)
	return s, nil
}

// Attach starts s's stack on tun and serves listeners, as New says (it
// takes both; a nil tun, an init that made no device, is an error). On
// an error s is closed.
func (s *Session) Attach(tun *os.File, listeners map[string]*os.File) error {
	s.tun = tun
	var err error
	if tun == nil {
		err = errors.New("egress: the init made no device")
	} else {
		err = s.attachDevice()
	}
	if err != nil {
		closeAll(nil, listeners)
		s.Close()
		return err
	}
	for addr, f := range listeners {
		if err := s.serveListener(addr, f); err != nil {
			s.Close()
			closeAll(nil, listeners)
			return err
		}
	}
	return nil
}

// closeAll closes tun (when not nil) and listeners.
func closeAll(tun *os.File, listeners map[string]*os.File) {
	if tun != nil {
		tun.Close()
	}
	for _, f := range listeners {
		f.Close()
	}
}

// newStack makes gVisor's stack for s: every address is accepted
// (promiscuous) and may be answered from (spoofing), so that the stack
// terminates each connection as its destination would.
func newStack(s *Session) *stack.Stack {
	st := stack.New(stack.Options{
		NetworkProtocols:   []stack.NetworkProtocolFactory{ipv4.NewProtocol, ipv6.NewProtocol},
		TransportProtocols: []stack.TransportProtocolFactory{tcp.NewProtocol, udp.NewProtocol},
	})
	sack := tcpip.TCPSACKEnabled(true)
	st.SetTransportProtocolOption(tcp.ProtocolNumber, &sack)
	// Buffers as large as a host socket's, so that a bulk transfer is
	// not held to the stack's small defaults.
	rcv := tcpip.TCPReceiveBufferSizeRangeOption{Min: tcp.MinBufferSize, Default: 1 << 20, Max: 8 << 20}
	snd := tcpip.TCPSendBufferSizeRangeOption{Min: tcp.MinBufferSize, Default: 1 << 20, Max: 8 << 20}
	st.SetTransportProtocolOption(tcp.ProtocolNumber, &rcv)
	st.SetTransportProtocolOption(tcp.ProtocolNumber, &snd)
	moderate := tcpip.TCPModerateReceiveBufferOption(true)
	st.SetTransportProtocolOption(tcp.ProtocolNumber, &moderate)
	// The handlers before the device: its packets flow once it is
	// attached.
	fwd := tcp.NewForwarder(st, 0, 1024, s.handleTCP)
	st.SetTransportProtocolHandler(tcp.ProtocolNumber, fwd.HandlePacket)
	ufwd := udp.NewForwarder(st, s.handleUDP)
	st.SetTransportProtocolHandler(udp.ProtocolNumber, ufwd.HandlePacket)
	return st
}

// attachDevice puts the stack on s.tun.
func (s *Session) attachDevice() error {
	st := s.stack
	ep, err := fdbased.New(&fdbased.Options{FDs: []int{int(s.tun.Fd())}, MTU: uint32(s.opts.MTU)})
	if err != nil {
		return fmt.Errorf("egress: the device: %w", err)
	}
	st.SetRouteTable([]tcpip.Route{{Destination: header.IPv4EmptySubnet, NIC: 1}, {Destination: header.IPv6EmptySubnet, NIC: 1}})
	if e := st.CreateNICWithOptions(1, ep, stack.NICOptions{Disabled: true}); e != nil {
		return fmt.Errorf("egress: the device: %s", e)
	}
	st.SetPromiscuousMode(1, true)
	st.SetSpoofing(1, true)
	if e := st.EnableNIC(1); e != nil {
		return fmt.Errorf("egress: the device: %s", e)
	}
	return nil
}

// Close stops the stack, closes every connection the session has open,
// answers its pending questions with no, and returns once every
// goroutine of the session has ended.
func (s *Session) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	conns := s.conns
	s.conns = nil
	s.mu.Unlock()
	s.cancel()
	for c := range conns {
		c.Close()
	}
	s.stack.RemoveNIC(1)
	s.stack.Close()
	s.wg.Wait()
	s.stack.Wait()
	s.stack.Destroy()
	if s.tun == nil { // prepared, never attached
		return nil
	}
	return s.tun.Close()
}

// track registers c to be closed by Close; false when the session is
// closed (c is then closed).
func (s *Session) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		c.Close()
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *Session) untrack(c net.Conn) {
	s.mu.Lock()
	if s.conns != nil {
		delete(s.conns, c)
	}
	s.mu.Unlock()
	c.Close()
}

// goes runs f in a goroutine Close waits for; false when closed.
func (s *Session) goes(f func()) bool {
	if !s.enter() {
		return false
	}
	go func() {
		defer s.wg.Done()
		f()
	}()
	return true
}

// enter counts the calling goroutine among those Close waits for (it
// calls s.wg.Done when it ends); false when closed.
func (s *Session) enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.wg.Add(1)
	return true
}

// Denials returns the denials recorded from since on, oldest first.
func (s *Session) Denials(since time.Time) []Denial {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Denial
	for _, d := range s.denials {
		if !d.At.Before(since) {
			out = append(out, d)
		}
	}
	return out
}

func (s *Session) record(host string, port int, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.denials) == maxDenials {
		copy(s.denials, s.denials[1:])
		s.denials = s.denials[:maxDenials-1]
	}
	s.denials = append(s.denials, Denial{Host: host, Port: port, Reason: reason, At: time.Now()})
}

func (s *Session) debug(msg string, args ...any) {
	if s.opts.Log != nil {
		s.opts.Log.Debug(msg, args...)
	}
}

// errClosed is returned by the operations of a closed session.
var errClosed = errors.New("egress: session closed")
