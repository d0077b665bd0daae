//go:build linux

// Package netlab runs a test package inside a network lab, so that no
// test of conch's network policy can send a packet off this machine,
// whatever the code under test does. The lab is two network namespaces
// made by the test binary: the tests' own ("the host": its loopback, and
// 192.0.2.1 on a veth pair), and behind the veth pair "the internet", a
// namespace holding the addresses the tests name (public stand-ins in
// 203.0.113.0/24, a private address, the cloud metadata address) and the
// servers on them (HTTP, HTTPS with a test CA, TCP and UDP echo, relays
// to the host's own servers), each counting the connections it gets.
// Nothing routes further. A DNS server of the lab's own answers what
// the tests set (SetHost), named by /etc/resolv.conf in a private mount
// namespace, and /dev/net/tun is usable by any user there (a private
// device node of mode 0666, Debian's default), so that tests run as uid
// 65534 too without changing the host's node.
package netlab

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
	"golang.org/x/sys/unix"
)

// The lab's addresses in its internet.
var (
	// Public stand in for the internet: tests name them through the
	// lab's DNS.
	Public = []netip.Addr{
		netip.MustParseAddr("203.0.113.10"), netip.MustParseAddr("203.0.113.11"),
		netip.MustParseAddr("203.0.113.12"), netip.MustParseAddr("203.0.113.13"),
		netip.MustParseAddr("203.0.113.14"), netip.MustParseAddr("203.0.113.15"),
	}
	// Private is an address of a private range.
	Private = netip.MustParseAddr("10.1.2.3")
	// Metadata is the cloud metadata address.
	Metadata = netip.MustParseAddr("169.254.169.254")
	// Host is the tests' own address on the veth pair (the host's own).
	Host = netip.MustParseAddr("192.0.2.1")
)

// The internet's servers, on every address of it.
const (
	HTTPPort  = 80  // GET / answers "hello from <address>"; GET /bytes/<n> n bytes
	HTTPSPort = 443 // the same over TLS, for *.example.test and example.test (CA: CAFile)
	EchoPort  = 7   // TCP and UDP echo
)

// dnsAddr is where the lab's DNS server answers; control its HTTP
// endpoint (SetHost, Hits, Relay).
const (
	dnsAddr = "127.0.0.53:53"
	control = "127.0.0.53:8053"
)

const (
	envLab = "CONCH_NETLAB"
	envDir = "CONCH_NETLAB_DIR"
)

// Enter puts the test binary in the lab; call it first thing in
// TestMain:
//
//	if code, done := netlab.Enter(); done {
//		os.Exit(code)
//	}
//
// Outside the lab, run as root, it runs the test binary again in new
// network and mount namespaces and returns that run's exit status with
// done; run by an ordinary user it returns at once, and Need skips the
// tests. In the new namespaces, that process sets the lab up, serves the
// lab's servers, and runs the tests in a child of its own (so that the
// tests' goroutine and process checks do not see the servers, nor their
// kills reach them); the processes the tests start (a test run again as
// uid 65534) inherit the lab.
func Enter() (code int, done bool) {
	switch os.Getenv(envLab) {
	case "1":
		return 0, false
	case "setup":
		if err := setUp(); err != nil {
			fmt.Fprintln(os.Stderr, "netlab:", err)
			return 1, true
		}
		// The tests run in a child: nothing of the lab's servers is in
		// their process, and nothing they kill reaches the servers.
		return runSelf(envLab + "=1"), true
	}
	if os.Geteuid() != 0 {
		return 0, false
	}
	// The lab's tmpfs is mounted here inside the lab; the directory is
	// made and removed out here.
	dir, err := os.MkdirTemp("", "conch-netlab-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "netlab:", err)
		return 1, true
	}
	defer os.Remove(dir)
	return runSelf(envDir+"="+dir, envLab+"=setup"), true
}

// runSelf runs the test binary again with its arguments and env added to
// its environment, in new network and mount namespaces unless env puts
// it in the lab already, and returns its exit status.
func runSelf(env ...string) int {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "netlab:", err)
		return 1
	}
	args := os.Args[1:]
	cmd := exec.Command(exe, args...)
	if os.Getenv(envLab) == "" {
		cmd = exec.Command("unshare", append([]string{"--net", "--mount", "--propagation", "private", "--", exe}, args...)...)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Run(); err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		fmt.Fprintln(os.Stderr, "netlab:", err)
		return 1
	}
	return 0
}

// Need skips t outside the lab.
func Need(t testing.TB) {
	t.Helper()
	if os.Getenv(envLab) != "1" {
		t.Skip("netlab: the network lab needs root (run the tests as root, as CI does)")
	}
}

// Dir is the lab's own directory (a tmpfs anyone may read): CAFile is in
// it.
func Dir() string { return os.Getenv(envDir) }

// CAFile is the PEM file of the CA that signed the internet's HTTPS
// certificate.
func CAFile() string { return filepath.Join(Dir(), "ca.pem") }

// internetNS is the internet's namespace, bound where ip netns keeps it.
const internetNS = "/run/netns/conch-internet"

// setUp makes this process's namespaces the lab.
func setUp() error {
	run := func(args ...string) error {
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("%v: %v: %s", args, err, out)
		}
		return nil
	}
	in := func(args ...string) error { return run(append([]string{"ip", "-n", "conch-internet"}, args...)...) }
	// ip netns keeps its namespaces as files in /run/netns, which the
	// host shares: a tmpfs of the lab's own there keeps them in the lab.
	if err := os.MkdirAll("/run/netns", 0o755); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", "/run/netns", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=64k,mode=0755"); err != nil {
		return fmt.Errorf("tmpfs on /run/netns: %w", err)
	}
	steps := [][]string{
		{"ip", "link", "set", "lo", "up"},
		{"ip", "netns", "add", "conch-internet"},
		{"ip", "link", "add", "veth0", "type", "veth", "peer", "name", "veth1", "netns", "conch-internet"},
		{"ip", "addr", "add", Host.String() + "/24", "dev", "veth0"},
		{"ip", "link", "set", "veth0", "up"},
	}
	for _, st := range steps {
		if err := run(st...); err != nil {
			return err
		}
	}
	for _, st := range [][]string{
		{"link", "set", "lo", "up"},
		{"addr", "add", "192.0.2.2/24", "dev", "veth1"},
		{"link", "set", "veth1", "up"},
		{"route", "add", "default", "via", Host.String()},
	} {
		if err := in(st...); err != nil {
			return err
		}
	}
	for _, a := range append(append([]netip.Addr{}, Public...), Private, Metadata) {
		if err := in("addr", "add", a.String()+"/32", "dev", "lo"); err != nil {
			return err
		}
		if err := run("ip", "route", "add", a.String()+"/32", "via", "192.0.2.2"); err != nil {
			return err
		}
	}
	dir := Dir()
	// A tmpfs of the lab's own, without nodev, for a device node.
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=256k,mode=0755"); err != nil {
		return fmt.Errorf("tmpfs: %w", err)
	}
	resolv := filepath.Join(dir, "resolv.conf")
	if err := os.WriteFile(resolv, []byte("nameserver 127.0.0.53\n"), 0o644); err != nil {
		return err
	}
	if err := unix.Mount(resolv, "/etc/resolv.conf", "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind resolv.conf: %w", err)
	}
	tun := filepath.Join(dir, "tun")
	if err := unix.Mknod(tun, unix.S_IFCHR|0o666, int(unix.Mkdev(10, 200))); err != nil {
		return fmt.Errorf("mknod: %w", err)
	}
	if err := os.Chmod(tun, 0o666); err != nil {
		return err
	}
	if err := unix.Mount(tun, "/dev/net/tun", "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind /dev/net/tun: %w", err)
	}
	if err := writeCA(dir); err != nil {
		return err
	}
	return serve()
}

// zone is the lab DNS server's records: A records by lowercased name.
var zone = struct {
	sync.Mutex
	a map[string][]netip.Addr
}{a: map[string][]netip.Addr{}}

// hits counts the connections (and UDP datagrams) each internet server
// got, by local address and port.
var hits = struct {
	sync.Mutex
	n map[string]int
}{n: map[string]int{}}

func hit(addr net.Addr) {
	hits.Lock()
	hits.n[addr.String()]++
	hits.Unlock()
}

func controlClient() *http.Client {
	return &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}, Timeout: 10 * time.Second}
}

func post(t testing.TB, path string, v url.Values) string {
	t.Helper()
	resp, err := controlClient().PostForm("http://"+control+path, v)
	if err != nil {
		t.Fatalf("netlab: %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("netlab: %s: %s: %s", path, resp.Status, b)
	}
	return string(b)
}

// SetHost makes name resolve to addrs in the lab's DNS (none: NXDOMAIN),
// through the servers' control endpoint, so that a test run as uid 65534
// in a process of its own changes the same records.
func SetHost(t testing.TB, name string, addrs ...netip.Addr) {
	t.Helper()
	v := url.Values{"name": {name}}
	for _, a := range addrs {
		v.Add("addr", a.String())
	}
	post(t, "/hosts", v)
}

// Hits is how many connections the internet's TCP server at ap got so
// far (ap's string with "/udp" appended: datagrams its UDP echo got).
func Hits(t testing.TB, ap netip.AddrPort) int {
	t.Helper()
	n, err := strconv.Atoi(post(t, "/hits", url.Values{"addr": {ap.String()}}))
	if err != nil {
		t.Fatalf("netlab: hits: %v", err)
	}
	return n
}

// Relay makes the internet's listen (an address of Public, any port)
// relay each TCP connection to to, a server of the tests on the host
// (Host or loopback): a host's own server (sshd, say) reached as if it
// were on the internet.
func Relay(t testing.TB, listen, to netip.AddrPort) {
	t.Helper()
	post(t, "/relay", url.Values{"listen": {listen.String()}, "to": {to.String()}})
}

// serve runs the lab's servers: DNS and control here, the internet's
// servers in its namespace.
func serve() error {
	pc, err := net.ListenPacket("udp", dnsAddr)
	if err != nil {
		return err
	}
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if out := answer(buf[:n]); out != nil {
				pc.WriteTo(out, from)
			}
		}
	}()
	ln, err := net.Listen("tcp", control)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /hosts", func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		var addrs []netip.Addr
		for _, s := range r.Form["addr"] {
			a, err := netip.ParseAddr(s)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			addrs = append(addrs, a)
		}
		zone.Lock()
		if len(addrs) == 0 {
			delete(zone.a, canonical(r.Form.Get("name")))
		} else {
			zone.a[canonical(r.Form.Get("name"))] = addrs
		}
		zone.Unlock()
	})
	mux.HandleFunc("POST /hits", func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		hits.Lock()
		n := hits.n[r.Form.Get("addr")]
		hits.Unlock()
		fmt.Fprint(w, n)
	})
	mux.HandleFunc("POST /relay", func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		to := r.Form.Get("to")
		l, err := inInternet(func() (net.Listener, error) { return net.Listen("tcp", r.Form.Get("listen")) })
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		go accept(l, func(c net.Conn) {
			up, err := net.Dial("tcp", to)
			if err != nil {
				c.Close()
				return
			}
			splice(c, up)
		})
	})
	go http.Serve(ln, mux)
	return serveInternet()
}

// inInternet runs listen on a thread that has entered the internet's
// namespace: the socket it makes lives there. The thread is not given
// back to the runtime (it leaves with the goroutine).
func inInternet[T any](listen func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	ch := make(chan result)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		var r result
		fd, err := unix.Open(internetNS, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err == nil {
			err = unix.Setns(fd, unix.CLONE_NEWNET)
			unix.Close(fd)
		}
		if err != nil {
			r.err = fmt.Errorf("enter the internet: %w", err)
		} else {
			r.v, r.err = listen()
		}
		ch <- r
	}()
	r := <-ch
	return r.v, r.err
}

func accept(l net.Listener, handle func(net.Conn)) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		hit(c.LocalAddr())
		go handle(c)
	}
}

func splice(a, b net.Conn) {
	done := make(chan struct{})
	go func() {
		io.Copy(a, b)
		a.(*net.TCPConn).CloseWrite()
		close(done)
	}()
	io.Copy(b, a)
	b.(*net.TCPConn).CloseWrite()
	<-done
	a.Close()
	b.Close()
}

// serveInternet starts the internet's servers on all its addresses.
func serveInternet() error {
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n, ok := strings.CutPrefix(r.URL.Path, "/bytes/"); ok {
			size, err := strconv.ParseInt(n, 10, 64)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
			buf := make([]byte, 256<<10)
			for size > 0 {
				k := min(size, int64(len(buf)))
				if _, err := w.Write(buf[:k]); err != nil {
					return
				}
				size -= k
			}
			return
		}
		local := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
		host, _, _ := net.SplitHostPort(local.String())
		fmt.Fprintf(w, "hello from %s", host)
	})
	for _, port := range []int{HTTPPort, HTTPSPort, EchoPort} {
		l, err := inInternet(func() (net.Listener, error) { return net.Listen("tcp", ":"+strconv.Itoa(port)) })
		if err != nil {
			return err
		}
		switch port {
		case HTTPPort:
			go http.Serve(countingListener{l}, handler)
		case HTTPSPort:
			cert, err := tls.LoadX509KeyPair(filepath.Join(Dir(), "server.pem"), filepath.Join(Dir(), "server.key"))
			if err != nil {
				return err
			}
			go http.Serve(tls.NewListener(countingListener{l}, &tls.Config{Certificates: []tls.Certificate{cert}}), handler)
		case EchoPort:
			go accept(l, func(c net.Conn) {
				io.Copy(c, c)
				c.Close()
			})
		}
	}
	// One UDP socket per address: a reply from a socket bound to all
	// of them would leave from the veth's address, which a connected
	// client socket drops.
	for _, a := range append(append([]netip.Addr{}, Public...), Private, Metadata) {
		ap := netip.AddrPortFrom(a, EchoPort)
		pc, err := inInternet(func() (net.PacketConn, error) { return net.ListenPacket("udp", ap.String()) })
		if err != nil {
			return err
		}
		go func() {
			buf := make([]byte, 65535)
			for {
				n, from, err := pc.ReadFrom(buf)
				if err != nil {
					return
				}
				hits.Lock()
				hits.n[ap.String()+"/udp"]++
				hits.Unlock()
				pc.WriteTo(buf[:n], from)
			}
		}()
	}
	return nil
}

type countingListener struct{ net.Listener }

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		hit(c.LocalAddr())
	}
	return c, err
}

// writeCA makes a CA and a certificate for *.example.test signed by it,
// in dir: ca.pem, server.pem, server.key.
func writeCA(dir string) error {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now()
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "conch netlab CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "example.test"},
		DNSNames: []string{"example.test", "*.example.test"}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	for name, block := range map[string]*pem.Block{
		"ca.pem":     {Type: "CERTIFICATE", Bytes: caDER},
		"server.pem": {Type: "CERTIFICATE", Bytes: der},
		"server.key": {Type: "EC PRIVATE KEY", Bytes: keyDER},
	} {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(block), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func canonical(name string) string {
	return strings.ToLower(strings.TrimSuffix(name, "."))
}

func answer(query []byte) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil {
		return nil
	}
	q, err := p.Question()
	if err != nil {
		return nil
	}
	zone.Lock()
	addrs, ok := zone.a[canonical(q.Name.String())]
	zone.Unlock()
	rh := dnsmessage.Header{ID: h.ID, Response: true, RecursionDesired: h.RecursionDesired, RecursionAvailable: true}
	if !ok {
		rh.RCode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, rh)
	b.StartQuestions()
	b.Question(q)
	b.StartAnswers()
	for _, a := range addrs {
		if q.Type == dnsmessage.TypeA && a.Is4() {
			b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 1}, dnsmessage.AResource{A: a.As4()})
		}
	}
	out, _ := b.Finish()
	return out
}
