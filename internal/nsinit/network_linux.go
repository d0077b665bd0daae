//go:build linux

package nsinit

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/conch-dev/conch/internal/sandbox"
)

// Network is how the init sets up its network namespace for a filtered
// network policy (docs/sandbox.md#network): a TUN device that is the
// namespace's only way out, served by conch's user-space stack in the
// server, the loopback addresses conch answers on inside, and the
// resolver configuration that points commands at conch's DNS.
type Network struct {
	// TUN makes the device TUNName with the address TUNAddr and the
	// default route through it, and brings up the loopback; the server
	// gets its descriptor.
	TUN bool `json:"tun,omitempty"`
	// MTU of the device (0: DefaultMTU).
	MTU int `json:"mtu,omitempty"`
	// Listen are loopback addresses ("127.0.0.1:5432", "[::1]:5432")
	// the init listens on inside the namespace; the server gets each
	// listener's descriptor and answers its connections (allow_local
	// forwards them to the host's loopback; conch's own ports refuse
	// them). An IPv6 address where the namespace has no IPv6 is skipped.
	Listen []string `json:"listen,omitempty"`
	// Resolv, when not "", is bound read-only over /etc/resolv.conf
	// inside the init's mount namespace.
	Resolv string `json:"resolv,omitempty"`
}

// Names and addresses of the device inside a session's namespace.
const (
	TUNName = "tun0"
	// TUNAddr is the namespace's own address on the device, in the
	// benchmarking range (198.18.0.0/15), which no network routes.
	TUNAddr = "198.18.0.1"
	// DefaultMTU is large, so that a bulk transfer takes few packets
	// (the device adds no per-packet cost but the stack's).
	DefaultMTU = 65520
)

// NetFiles are what the init made for Options.Network, handed over by
// TakeNetwork: the TUN device (nil without Network.TUN) and the
// listeners by address (the Network.Listen entries the init could
// listen on).
type NetFiles struct {
	TUN       *os.File
	Listeners map[string]*os.File
}

// newNetNS reports whether the init gets a network namespace of its own:
// for Options.Network, and for a sandbox whose network is off.
func newNetNS(o Options) bool {
	return o.Network != nil || (o.Sandbox != nil && o.Sandbox.Network == sandbox.NetworkOff)
}

// TakeNetwork hands over the descriptors the init made for
// Options.Network; the caller owns them. A second call returns nothing;
// Close closes what was never taken.
func (i *Init) TakeNetwork() NetFiles {
	i.mu.Lock()
	defer i.mu.Unlock()
	n := i.net
	i.net = NetFiles{}
	return n
}

// keepNetwork records the descriptors of the init's ready message: the
// device first when m says there is one, then one per m.Listening.
func (i *Init) keepNetwork(m *message, fds []int) {
	files := make([]*os.File, len(fds))
	for k, fd := range fds {
		files[k] = os.NewFile(uintptr(fd), "nsinit-net")
	}
	if m.TUN && len(files) > 0 {
		i.net.TUN, files = files[0], files[1:]
	}
	for k, addr := range m.Listening {
		if k < len(files) {
			if i.net.Listeners == nil {
				i.net.Listeners = make(map[string]*os.File)
			}
			i.net.Listeners[addr] = files[k]
		}
	}
	for _, f := range files[min(len(m.Listening), len(files)):] {
		f.Close()
	}
}

// closeNetwork closes the descriptors no one took.
func (i *Init) closeNetwork() {
	n := i.TakeNetwork()
	if n.TUN != nil {
		n.TUN.Close()
	}
	for _, f := range n.Listeners {
		f.Close()
	}
}

// setUpNetwork makes, in the init's own network and mount namespaces,
// what s.net asks; it runs after / was made private (the resolver's bind
// must not propagate to the host) and before Landlock and the capability
// drop (it needs CAP_NET_ADMIN in the namespace and opens
// /dev/net/tun). The descriptors for the server are kept in s.netReady.
func (s *initState) setUpNetwork() error {
	n := s.net
	if n == nil {
		return nil
	}
	s.netReady = &message{}
	if err := linkUp("lo"); err != nil {
		return fmt.Errorf("init: network: %w", err)
	}
	if n.TUN {
		f, err := makeTUN(n.MTU)
		if err != nil {
			return fmt.Errorf("init: network: %w", err)
		}
		s.netReady.TUN = true
		s.netFiles = append(s.netFiles, f)
	}
	for _, addr := range n.Listen {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			ap, perr := netip.ParseAddrPort(addr)
			if perr == nil && ap.Addr().Is6() {
				continue // no IPv6 in the namespace
			}
			return fmt.Errorf("init: network: listen on %s: %w", addr, err)
		}
		f, err := l.(*net.TCPListener).File()
		l.Close()
		if err != nil {
			return fmt.Errorf("init: network: listen on %s: %w", addr, err)
		}
		s.netReady.Listening = append(s.netReady.Listening, addr)
		s.netFiles = append(s.netFiles, f)
	}
	if n.Resolv != "" {
		if err := bindResolv(n.Resolv); err != nil {
			return fmt.Errorf("init: network: %w", err)
		}
	}
	return nil
}

// closeNetFiles closes the init's copies once the server has them.
func (s *initState) closeNetFiles() {
	for _, f := range s.netFiles {
		f.Close()
	}
	s.netFiles = nil
}

// makeTUN creates the device, gives it its address and MTU, brings it
// up and routes everything through it.
func makeTUN(mtu int) (*os.File, error) {
	if mtu <= 0 {
		mtu = DefaultMTU
	}
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open /dev/net/tun: %w", err)
	}
	f := os.NewFile(uintptr(fd), "/dev/net/tun")
	ifr, err := unix.NewIfreq(TUNName)
	if err == nil {
		ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
		err = unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr)
	}
	if err == nil {
		// Persistent, the device is not unregistered when the server
		// closes its descriptor (the kernel waits for RCU grace periods
		// there: 10-20 ms of every contained session's end), but with
		// the namespace, in the kernel's own time. The descriptor holds
		// the namespace; nothing else outlives the init.
		err = unix.IoctlSetInt(fd, unix.TUNSETPERSIST, 1)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("create %s: %w", TUNName, err)
	}
	err = withInetSocket(func(sock int) error {
		ifr, _ := unix.NewIfreq(TUNName)
		ifr.SetUint32(uint32(mtu))
		if err := unix.IoctlIfreq(sock, unix.SIOCSIFMTU, ifr); err != nil {
			return fmt.Errorf("set the MTU of %s: %w", TUNName, err)
		}
		ifr, _ = unix.NewIfreq(TUNName)
		if err := ifr.SetInet4Addr(netip.MustParseAddr(TUNAddr).AsSlice()); err != nil {
			return err
		}
		if err := unix.IoctlIfreq(sock, unix.SIOCSIFADDR, ifr); err != nil {
			return fmt.Errorf("address %s: %w", TUNName, err)
		}
		return nil
	})
	if err == nil {
		err = linkUp(TUNName)
	}
	if err == nil {
		err = defaultRoute(TUNName)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func withInetSocket(do func(sock int) error) error {
	sock, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	defer unix.Close(sock)
	return do(sock)
}

// linkUp brings the interface name up.
func linkUp(name string) error {
	return withInetSocket(func(sock int) error {
		ifr, err := unix.NewIfreq(name)
		if err != nil {
			return err
		}
		if err := unix.IoctlIfreq(sock, unix.SIOCGIFFLAGS, ifr); err != nil {
			return fmt.Errorf("flags of %s: %w", name, err)
		}
		ifr.SetUint16(ifr.Uint16() | unix.IFF_UP | unix.IFF_RUNNING)
		if err := unix.IoctlIfreq(sock, unix.SIOCSIFFLAGS, ifr); err != nil {
			return fmt.Errorf("bring %s up: %w", name, err)
		}
		return nil
	})
}

// defaultRoute routes every IPv4 destination out of the interface name
// (a netlink RTM_NEWROUTE: the ioctl for routes needs a gateway).
func defaultRoute(name string) error {
	ifc, err := net.InterfaceByName(name)
	if err != nil {
		return fmt.Errorf("default route: %w", err)
	}
	sock, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("default route: netlink: %w", err)
	}
	defer unix.Close(sock)
	rt := unix.RtMsg{Family: unix.AF_INET, Table: unix.RT_TABLE_MAIN, Protocol: unix.RTPROT_BOOT,
		Scope: unix.RT_SCOPE_LINK, Type: unix.RTN_UNICAST}
	attr := unix.RtAttr{Len: unix.SizeofRtAttr + 4, Type: unix.RTA_OIF}
	size := unix.SizeofNlMsghdr + unix.SizeofRtMsg + int(attr.Len)
	hdr := unix.NlMsghdr{Len: uint32(size), Type: unix.RTM_NEWROUTE,
		Flags: unix.NLM_F_REQUEST | unix.NLM_F_ACK | unix.NLM_F_CREATE | unix.NLM_F_EXCL, Seq: 1}
	b := make([]byte, 0, size)
	b = append(b, unsafe.Slice((*byte)(unsafe.Pointer(&hdr)), unix.SizeofNlMsghdr)...)
	b = append(b, unsafe.Slice((*byte)(unsafe.Pointer(&rt)), unix.SizeofRtMsg)...)
	b = append(b, unsafe.Slice((*byte)(unsafe.Pointer(&attr)), unix.SizeofRtAttr)...)
	b = binary.NativeEndian.AppendUint32(b, uint32(ifc.Index))
	if err := unix.Sendto(sock, b, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("default route: send: %w", err)
	}
	buf := make([]byte, 4096)
	n, _, err := unix.Recvfrom(sock, buf, 0)
	if err != nil {
		return fmt.Errorf("default route: receive: %w", err)
	}
	msgs, err := syscall.ParseNetlinkMessage(buf[:n])
	if err != nil {
		return fmt.Errorf("default route: %w", err)
	}
	for _, m := range msgs {
		if m.Header.Type == syscall.NLMSG_ERROR && len(m.Data) >= 4 {
			if code := int32(binary.NativeEndian.Uint32(m.Data)); code != 0 {
				return fmt.Errorf("default route: %w", unix.Errno(-code))
			}
			return nil
		}
	}
	return errors.New("default route: no answer from the kernel")
}

// bindResolv binds a read-only file holding text over /etc/resolv.conf
// (the file it names, when it is a symbolic link), in this mount
// namespace only. The file is a temporary file, unlinked once bound (a
// memfd, or an unlinked file, cannot be bound): nothing of it stays on
// disk.
func bindResolv(text string) error {
	f, err := os.CreateTemp("", "conch-resolv-")
	if err != nil {
		return fmt.Errorf("resolver: %w", err)
	}
	defer f.Close()
	defer os.Remove(f.Name())
	if _, err := f.WriteString(text); err != nil {
		return fmt.Errorf("resolver: write: %w", err)
	}
	f.Chmod(0o644)
	if err := sandbox.BindReadOnly(f.Name(), "/etc/resolv.conf"); err != nil {
		return fmt.Errorf("resolver: /etc/resolv.conf: %w", err)
	}
	return nil
}
