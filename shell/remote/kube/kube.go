// Package kube reaches a container of a Kubernetes pod for shell/remote,
// through the pods/exec subresource of the API server (client-go's
// remotecommand: WebSocket, with SPDY as the fallback), never by running
// kubectl: it deploys this conch binary into the container when it lacks
// it (over the exec's stdin, its checksum checked, as over SSH) and starts
// `conch agent` there, whose stdin and stdout carry the agent protocol.
// Only the byte stream differs from an SSH host or a podman container:
// the agent owns the processes and kills them all when its input ends
// (the kubelet closes it when the exec stream goes, whoever cut it).
//
// A host is a running pod (Host.Pod, New), or a pod template
// (Host.Template, NewTemplate): each session gets a pod of its own, made
// from the template on its first command and deleted at its end.
//
// The kubeconfig is read as kubectl reads it (KUBECONFIG, else
// ~/.kube/config; Host.Context picks a context). Only client-go's
// kubeconfig loader, its REST client and remotecommand are linked, not
// the typed clientset (about 28 MB more in the binary).
package kube

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/conch-dev/conch/shell/remote"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/httpstream"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
)

// Host is a container of a pod that commands run in.
type Host struct {
	// Name is the host as the model and the user know it.
	Name string
	// Namespace is the pod's namespace; "" is the context's (else
	// "default").
	Namespace string
	// Pod is a running pod's name; empty when Template is set.
	Pod string
	// Container is the pod's container; "" is its only (or default)
	// container.
	Container string
	// Template is a pod manifest (YAML or JSON) from which each session's
	// pod is made (NewTemplate); empty when Pod is set.
	Template string
	// Context is the kubeconfig context; "" is the current one.
	Context string
	// Cwd is where commands run by default; "" means the home directory
	// of the container's user.
	Cwd string
}

// ParseTarget splits a host's `kubernetes` value,
// "<namespace>/<pod>[/<container>]".
func ParseTarget(s string) (namespace, pod, container string, err error) {
	f := strings.Split(s, "/")
	if (len(f) != 2 && len(f) != 3) || f[0] == "" || f[1] == "" || (len(f) == 3 && f[2] == "") {
		return "", "", "", fmt.Errorf("%q must be <namespace>/<pod>[/<container>]", s)
	}
	if len(f) == 3 {
		container = f[2]
	}
	return f[0], f[1], container, nil
}

// Options configure how the pod is reached; a zero field means its
// default.
type Options struct {
	// Kubeconfig is the kubeconfig file (default: KUBECONFIG, else
	// ~/.kube/config).
	Kubeconfig string
	// AgentBinary is the conch binary deployed to the container (default:
	// this program's executable), built for the container's OS and
	// architecture.
	AgentBinary string
	// AgentArgs are extra arguments of `conch agent` in the container.
	AgentArgs []string
	// AgentPrefix goes before the agent's command line in its exec
	// (`env -i …` in tests that give the agent an environment of their
	// own; an exec's environment is the container's).
	AgentPrefix []string
	// ReadyTimeout bounds the wait for a template's pod to become ready
	// (default DefaultReadyTimeout).
	ReadyTimeout time.Duration
	// Stderr receives the agent's standard error (default: discarded).
	Stderr io.Writer
	// Executor configures the remote executor; its Cwd is Host.Cwd.
	Executor remote.Options
}

// DefaultReadyTimeout is Options.ReadyTimeout's default.
const DefaultReadyTimeout = 120 * time.Second

// New returns an executor for the running pod h.Pod that reaches it
// through pods/exec. It connects on first use.
func New(h Host, o *Options) (*remote.Executor, error) {
	d, err := NewDialer(h, o)
	if err != nil {
		return nil, err
	}
	var ro remote.Options
	if o != nil {
		ro = o.Executor
	}
	ro.Cwd = h.Cwd
	return remote.New(h.Name, d, &ro)
}

// Dialer starts agents in one pod's container; it implements
// remote.Dialer, and io.Closer: Close drops its idle connections.
type Dialer struct {
	host    Host
	opts    Options
	binHash string
	config  *rest.Config
	client  *rest.RESTClient
	// transport is the REST client's own connection pool, shared with no
	// other client, so that Close can drop its idle connections (and
	// their goroutines): client-go's own transports are cached for the
	// process's life and kept idle connections open after the host was
	// closed.
	transport *http.Transport

	mu       sync.Mutex // serialises deploying
	pod      string     // the pod commands run in
	closed   bool
	prepared remote.Prepared // the deployed agent, once deployed
}

var (
	_ remote.Dialer = (*Dialer)(nil)
	_ io.Closer     = (*Dialer)(nil)
)

// NewDialer checks h, a running pod, loads the kubeconfig and reads the
// agent binary's checksum.
func NewDialer(h Host, o *Options) (*Dialer, error) {
	var opts Options
	if o != nil {
		opts = *o
	}
	switch {
	case h.Template != "" && h.Pod == "":
		return nil, fmt.Errorf("host %s: pod template %s: use NewTemplate", h.Name, h.Template)
	case (h.Pod == "") == (h.Template == ""):
		return nil, fmt.Errorf("host %s: name a pod or a pod template, one of them", h.Name)
	case h.Cwd != "" && !path.IsAbs(h.Cwd):
		return nil, fmt.Errorf("host %s: cwd %q must be absolute", h.Name, h.Cwd)
	}
	if opts.Stderr == nil {
		opts.Stderr = io.Discard
	}
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = DefaultReadyTimeout
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if opts.Kubeconfig != "" {
		rules.ExplicitPath = opts.Kubeconfig
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: h.Context})
	config, err := cc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("host %s: kubeconfig: %w", h.Name, err)
	}
	if h.Namespace == "" {
		if h.Namespace, _, err = cc.Namespace(); err != nil {
			return nil, fmt.Errorf("host %s: kubeconfig: %w", h.Name, err)
		}
	}
	d := &Dialer{host: h, opts: opts, config: config, pod: h.Pod}
	if d.client, d.transport, err = restClient(config); err != nil {
		return nil, fmt.Errorf("host %s: %w", h.Name, err)
	}
	if opts.AgentBinary == "" {
		if opts.AgentBinary, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("host %s: find conch's own binary: %w", h.Name, err)
		}
	}
	if d.binHash, err = remote.FileSHA256(opts.AgentBinary); err != nil {
		return nil, fmt.Errorf("host %s: checksum of the agent binary: %w", h.Name, err)
	}
	d.opts = opts
	return d, nil
}

// restClient is a REST client of the core API group that sends and
// receives raw JSON: the typed clientset and its scheme of every API
// group would add megabytes to conch for the four calls made here. Its
// scheme knows metav1.Status, so that an error of the API server reads
// as the server said it. It runs over a transport of its own (the
// kubeconfig's TLS settings and credentials, HTTP/2 as client-go sets
// it up), not client-go's process-wide cached one, which its caller
// closes when done.
func restClient(base *rest.Config) (*rest.RESTClient, *http.Transport, error) {
	scheme := runtime.NewScheme()
	gv := schema.GroupVersion{Version: "v1"}
	metav1.AddToGroupVersion(scheme, gv)
	scheme.AddKnownTypes(gv, &metav1.Status{})
	config := rest.CopyConfig(base)
	config.APIPath = "/api"
	config.GroupVersion = &gv
	config.NegotiatedSerializer = serializer.NewCodecFactory(scheme).WithoutConversion()
	tlsConfig, err := rest.TLSConfigFor(config)
	if err != nil {
		return nil, nil, fmt.Errorf("kubernetes client: %w", err)
	}
	dial := config.Dial
	if dial == nil {
		dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	tr := utilnet.SetTransportDefaults(&http.Transport{
		Proxy:               config.Proxy, // nil: the environment's, as client-go's
		TLSClientConfig:     tlsConfig,
		TLSHandshakeTimeout: 10 * time.Second,
		DialContext:         dial,
	})
	rt, err := rest.HTTPWrappersForConfig(config, tr)
	if err != nil {
		return nil, nil, fmt.Errorf("kubernetes client: %w", err)
	}
	c, err := rest.RESTClientForConfigAndClient(config, &http.Client{Transport: rt, Timeout: config.Timeout})
	if err != nil {
		return nil, nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return c, tr, nil
}

// Dial implements remote.Dialer: it deploys the agent when the container
// lacks it, and starts it.
func (d *Dialer) Dial(ctx context.Context) (io.ReadWriteCloser, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, errors.New("closed")
	}
	if d.prepared.Path == "" {
		p, err := remote.Prepare(ctx, d.host.Name, d.run, d.opts.AgentBinary, d.binHash, d.host.Cwd)
		if err != nil {
			return nil, err
		}
		d.prepared = p
	}
	argv := append(append([]string{}, d.opts.AgentPrefix...), d.prepared.Argv(d.opts.AgentArgs)...)
	return d.startAgent(argv)
}

// executor is a pods/exec of argv in the host's container, stdin,
// stdout and stderr attached: over WebSocket, falling back to SPDY for an
// API server (or a proxy) that does not upgrade to it.
func (d *Dialer) executor(argv []string) (remotecommand.Executor, error) {
	u := d.execURL(argv)
	spdy, err := remotecommand.NewSPDYExecutor(d.config, http.MethodPost, u)
	if err != nil {
		return nil, fmt.Errorf("pods/exec: %w", err)
	}
	ws, err := remotecommand.NewWebSocketExecutor(d.config, http.MethodGet, u.String())
	if err != nil {
		return nil, fmt.Errorf("pods/exec: %w", err)
	}
	return remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
}

// execURL is the URL of a pods/exec of argv in the host's container,
// stdin, stdout and stderr attached.
func (d *Dialer) execURL(argv []string) *url.URL {
	req := d.client.Post().Resource("pods").Namespace(d.host.Namespace).Name(d.pod).SubResource("exec").
		Param("stdin", "true").Param("stdout", "true").Param("stderr", "true")
	if d.host.Container != "" {
		req = req.Param("container", d.host.Container)
	}
	for _, a := range argv {
		req = req.Param("command", a)
	}
	return req.URL()
}

// run implements remote.RunScript with the container's sh.
func (d *Dialer) run(ctx context.Context, script string, stdin io.Reader) (string, error) {
	ex, err := d.executor([]string{"sh", "-c", script})
	if err != nil {
		return "", err
	}
	if stdin == nil {
		stdin = bytes.NewReader(nil)
	}
	var out, errb bytes.Buffer
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: &out, Stderr: &errb})
	if err != nil {
		if ctx.Err() != nil {
			return "", context.Cause(ctx)
		}
		if msg := strings.TrimSpace(errb.String()); msg != "" {
			return "", fmt.Errorf("%w: %s", err, msg)
		}
		return "", fmt.Errorf("pods/exec: %w", err)
	}
	return out.String(), nil
}

// Bounds of a stream's end.
const (
	// closeWait bounds the wait for the exec to end once the agent's
	// input was closed: the agent kills what it started (its grace
	// included) and exits, and the API server then ends the stream; a
	// stream still open after it is cut.
	closeWait = 30 * time.Second
)

// startAgent starts the agent with an exec of its own.
func (d *Dialer) startAgent(argv []string) (io.ReadWriteCloser, error) {
	ex, err := d.executor(argv)
	if err != nil {
		return nil, fmt.Errorf("start agent: %w", err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	st := &stream{in: inW, out: outR, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(st.done)
		err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{
			Stdin: inR, Stdout: outW, Stderr: io.MultiWriter(d.opts.Stderr, &st.stderr)})
		inR.Close()
		var ee utilexec.CodeExitError
		switch {
		case errors.As(err, &ee):
			// The agent exited with an error (it could not start: a mode
			// this container cannot enforce, a cwd it lacks): its last
			// words say why.
			if last := st.stderr.Last(); last != "" {
				err = fmt.Errorf("agent exited with status %d: %s", ee.Code, last)
			}
			outW.CloseWithError(err)
		case err != nil:
			outW.CloseWithError(fmt.Errorf("pods/exec: %w", err))
		default:
			outW.Close()
		}
	}()
	return st, nil
}

// stream is an agent's exec: its stdout to read, its stdin to write.
type stream struct {
	in     *io.PipeWriter
	out    *io.PipeReader
	stderr remote.StderrTail
	cancel context.CancelFunc
	done   chan struct{} // closed once the exec ended
	once   sync.Once
}

func (st *stream) Read(b []byte) (int, error)  { return st.out.Read(b) }
func (st *stream) Write(b []byte) (int, error) { return st.in.Write(b) }

// Close ends the agent's input (it then kills what it started and
// exits) and waits for the exec to end.
func (st *stream) Close() error {
	st.once.Do(func() {
		st.in.Close()
		select {
		case <-st.done:
		case <-time.After(closeWait):
			st.cancel()
			<-st.done
		}
		st.cancel()
		st.out.Close()
	})
	return nil
}

// Close implements io.Closer: the dialer dials no more, and the REST
// client's idle connections are closed. A pod of a template is deleted by
// its Template, not here.
func (d *Dialer) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	// The REST client's connections stay open idle, each with its reader
	// goroutine, until closed; the execs' connections are each stream's
	// own and end with it.
	d.transport.CloseIdleConnections()
	return nil
}

// forPod is a dialer of the pod ns/name that shares d's kubeconfig, REST
// client and checksum (a Template's dialer of one session's pod).
func (d *Dialer) forPod(ns, name string) *Dialer {
	h := d.host
	h.Namespace, h.Pod, h.Template = ns, name, ""
	return &Dialer{host: h, opts: d.opts, binHash: d.binHash, config: d.config, client: d.client, transport: d.transport, pod: name}
}
