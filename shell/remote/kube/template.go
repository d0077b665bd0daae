package kube

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/conch-dev/conch/internal/agent"
	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/shell/remote"
)

// managedByLabel is the label whose value is ManagedBy on every pod
// conch makes.
const managedByLabel = "app.kubernetes.io/managed-by"

// Template is a host made from a pod manifest (Host.Template): each owner
// (shell.Request.Owner, a session) gets a pod of its own, made from the
// manifest on the owner's first command and deleted when the owner ends
// (EndOwner) or the Template is closed; the agent runs inside it as in a
// running pod (New). The pods carry the label
// app.kubernetes.io/managed-by=conch and the annotations
// TemplateAnnotation and ServerAnnotation: the first pod a Template
// makes is preceded by the deletion of the pods of conch processes of
// this machine that no longer run (a server killed with SIGKILL).
//
// Template implements shell.Executor, shell.ContextLauncher,
// shell.OwnerEnder and shell.Terminals; it is safe for concurrent use.
type Template struct {
	host   Host
	opts   Options
	base   *Dialer // the kubeconfig, REST client and checksum the pods' dialers share
	limits shell.Limits
	sweep  sync.Once

	// closing ends, when Close begins, the pods' starts under way.
	closing context.Context
	stop    context.CancelCauseFunc

	mu       sync.Mutex
	sessions map[string]*session
	orphans  map[string]bool // "ns/name" of pods whose creation's answer was lost
	closed   bool
}

// session is one owner's pod and the executor that reaches it.
type session struct {
	ready  chan struct{} // closed once started, or once the start failed
	cancel context.CancelCauseFunc
	err    error  // why it did not start
	ns     string // the pod's namespace
	pod    string // the pod's name
	ex     *remote.Executor
}

var (
	_ shell.Executor        = (*Template)(nil)
	_ shell.ContextLauncher = (*Template)(nil)
	_ shell.OwnerEnder      = (*Template)(nil)
	_ shell.Terminals       = (*Template)(nil)
)

// errOwnerEnded ends the start of the pod of an owner that ended.
var errOwnerEnded = errors.New("the session ended")

// NewTemplate returns a host whose pods are made from the manifest
// h.Template; h.Pod must be empty. The manifest is read here (a bad file
// is a configuration error, not a host that cannot be reached), and
// again for each pod. Nothing is made until the first command.
func NewTemplate(h Host, o *Options) (*Template, error) {
	switch {
	case h.Template == "":
		return nil, fmt.Errorf("host %s: no pod template named", h.Name)
	case h.Pod != "":
		return nil, fmt.Errorf("host %s: both a pod (%s) and a pod template (%s): a host is a running pod or a template", h.Name, h.Pod, h.Template)
	case h.Cwd != "" && !path.IsAbs(h.Cwd):
		return nil, fmt.Errorf("host %s: cwd %q must be absolute", h.Name, h.Cwd)
	}
	if _, err := readTemplate(h.Template); err != nil {
		return nil, fmt.Errorf("host %s: %w", h.Name, err)
	}
	probe := h
	probe.Pod, probe.Template = "-", ""
	d, err := NewDialer(probe, o)
	if err != nil {
		return nil, err
	}
	h.Namespace = d.host.Namespace // the context's when h named none
	// Its defaults are those of every remote executor's Resolve.
	ro := d.opts.Executor
	l := shell.Limits{Cwd: h.Cwd, Timeout: ro.Timeout, MaxTimeout: ro.MaxTimeout, HomeRelative: true}
	if l.Timeout == 0 {
		l.Timeout = remote.DefaultTimeout
	}
	if l.MaxTimeout == 0 {
		l.MaxTimeout = remote.DefaultMaxTimeout
	}
	closing, stop := context.WithCancelCause(context.Background())
	return &Template{host: h, opts: d.opts, base: d, limits: l, closing: closing, stop: stop,
		sessions: map[string]*session{}, orphans: map[string]bool{}}, nil
}

// Name is the host's name.
func (t *Template) Name() string { return t.host.Name }

// Resolve implements shell.Executor as a running pod's executor does; it
// makes nothing.
func (t *Template) Resolve(r shell.Request) (shell.Spec, error) { return t.limits.Resolve(r) }

// Launch implements shell.Executor.
func (t *Template) Launch(s shell.Spec) (shell.Process, error) {
	return t.LaunchContext(context.Background(), s)
}

// LaunchContext implements shell.ContextLauncher: ctx bounds making the
// owner's pod and the dial, and a start that ctx ended is an abort
// before spawn.
func (t *Template) LaunchContext(ctx context.Context, s shell.Spec) (shell.Process, error) {
	return t.startIn(ctx, s, (*remote.Executor).LaunchContext)
}

// Start implements shell.Executor.
func (t *Template) Start(s shell.Spec) (shell.Process, error) {
	return t.StartContext(context.Background(), s)
}

// StartContext implements shell.ContextLauncher as LaunchContext does,
// for a command that runs in the background.
func (t *Template) StartContext(ctx context.Context, s shell.Spec) (shell.Process, error) {
	return t.startIn(ctx, s, (*remote.Executor).StartContext)
}

// startIn starts s with start in the executor of its owner's pod, making
// the pod first if needed, within ctx.
func (t *Template) startIn(ctx context.Context, s shell.Spec, start func(*remote.Executor, context.Context, shell.Spec) (shell.Process, error)) (shell.Process, error) {
	if ctx.Err() != nil {
		return nil, shell.AbortedBeforeSpawn(context.Cause(ctx))
	}
	var p shell.Process
	err := t.with(ctx, s.Owner, func(ex *remote.Executor) (err error) {
		p, err = start(ex, ctx, s)
		return err
	})
	if err != nil && ctx.Err() != nil {
		return nil, shell.AbortedBeforeSpawn(context.Cause(ctx))
	}
	return p, err
}

// StartTerminal implements shell.Terminals.
func (t *Template) StartTerminal(s shell.Spec) (shell.Terminal, error) {
	var tm shell.Terminal
	err := t.with(context.Background(), s.Owner, func(ex *remote.Executor) (err error) {
		tm, err = ex.StartTerminal(s)
		return err
	})
	return tm, err
}

// Hello makes the pod of the owner "" (deleted by Close) when it has
// none, and returns what its agent said of itself: what a command gets in
// a pod of this template.
func (t *Template) Hello(ctx context.Context) (agent.Hello, error) {
	var h agent.Hello
	err := t.with(ctx, "", func(ex *remote.Executor) (err error) {
		h, err = ex.Hello(ctx)
		return err
	})
	return h, err
}

// with calls f with the executor of owner's pod, making the pod when
// owner has none. When f finds the host unreachable because the pod is
// gone (deleted, or failed, behind conch's back), the owner gets a new
// pod and f is called once more.
func (t *Template) with(ctx context.Context, owner string, f func(*remote.Executor) error) error {
	for try := 0; ; try++ {
		s, err := t.session(ctx, owner)
		if err != nil {
			return err
		}
		err = f(s.ex)
		var ue *remote.UnreachableError
		if try > 0 || !errors.As(err, &ue) || ctx.Err() != nil || t.running(s.ns, s.pod) {
			return err
		}
		t.mu.Lock()
		if t.sessions[owner] == s {
			delete(t.sessions, owner)
		}
		t.mu.Unlock()
		t.end(s)
	}
}

// running reports whether the pod ns/name is there and not being
// deleted; an API server that cannot say is taken to mean it is.
func (t *Template) running(ns, name string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), deleteTimeout)
	defer cancel()
	raw, err := t.base.client.Get().Resource("pods").Namespace(ns).Name(name).Do(ctx).Raw()
	if err != nil {
		return !apierrors.IsNotFound(err)
	}
	var p pod
	if json.Unmarshal(raw, &p) != nil {
		return true
	}
	return p.Metadata.DeletionTimestamp == nil && !p.failed()
}

// Pods are the "namespace/name" of the pods made for owners now.
func (t *Template) Pods() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var names []string
	for _, s := range t.sessions {
		select {
		case <-s.ready:
			if s.err == nil {
				names = append(names, s.ns+"/"+s.pod)
			}
		default:
		}
	}
	return names
}

// EndOwner implements shell.OwnerEnder: the owner's agent kills
// everything it started and exits, and its pod is deleted; it returns
// once the API server no longer has the pod. A pod still being made is
// given up at once. An owner that has no pod has nothing to end.
func (t *Template) EndOwner(owner string) {
	t.mu.Lock()
	s := t.sessions[owner]
	delete(t.sessions, owner)
	t.mu.Unlock()
	if s != nil {
		s.cancel(errOwnerEnded)
		t.end(s)
	}
}

// Close implements shell.Executor: the pods being made are given up,
// every owner's pod is ended as by EndOwner, in parallel, and the pods
// whose creation's answer was lost are deleted too.
func (t *Template) Close() error {
	t.mu.Lock()
	t.closed = true
	sessions := t.sessions
	t.sessions = map[string]*session{}
	t.mu.Unlock()
	t.stop(shell.ErrClosed)
	var wg sync.WaitGroup
	errs := make(chan error, len(sessions))
	for _, s := range sessions {
		wg.Go(func() { errs <- t.end(s) })
	}
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	// The starts have all ended: no orphan is added from now on.
	t.mu.Lock()
	orphans := t.orphans
	t.orphans = map[string]bool{}
	t.mu.Unlock()
	for o := range orphans {
		ns, name, _ := strings.Cut(o, "/")
		ctx, cancel := context.WithTimeout(context.Background(), deleteTimeout)
		if err := t.base.deleteNow(ctx, ns, name, ""); err != nil {
			all = append(all, fmt.Errorf("host %s: %w", t.host.Name, err))
		}
		cancel()
	}
	// The REST client's connections (pods made, watched and deleted) stay
	// open idle, each with its reader goroutine, until closed here.
	t.base.Close()
	return errors.Join(all...)
}

// end closes s's executor and deletes its pod, once its start ended.
func (t *Template) end(s *session) error {
	<-s.ready
	if s.err != nil {
		return nil
	}
	err := s.ex.Close()
	ctx, cancel := context.WithTimeout(context.Background(), deleteTimeout)
	defer cancel()
	if derr := t.base.deletePod(ctx, s.ns, s.pod, ""); derr != nil && err == nil {
		err = fmt.Errorf("host %s: %w", t.host.Name, derr)
	}
	return err
}

// session returns owner's pod and its executor, making the pod when
// owner has none. Callers for an owner whose pod is being made wait for
// it; a start that failed is tried again by the next call. Its errors
// are *remote.UnreachableError.
func (t *Template) session(ctx context.Context, owner string) (*session, error) {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil, shell.ErrClosed
	}
	s, ok := t.sessions[owner]
	if !ok {
		// The start ends with ctx, with the owner (EndOwner) and with the
		// Template (Close), whichever ends first.
		sctx, cancel := context.WithCancelCause(ctx)
		s = &session{ready: make(chan struct{}), cancel: cancel}
		t.sessions[owner] = s
		t.mu.Unlock()
		stop := context.AfterFunc(t.closing, func() { cancel(context.Cause(t.closing)) })
		s.ns, s.pod, s.ex, s.err = t.start(sctx)
		stop()
		if s.err != nil {
			t.mu.Lock()
			if t.sessions[owner] == s {
				delete(t.sessions, owner)
			}
			t.mu.Unlock()
		}
		close(s.ready)
	} else {
		t.mu.Unlock()
		select {
		case <-s.ready:
		case <-ctx.Done():
			return nil, &remote.UnreachableError{Host: t.host.Name, Err: context.Cause(ctx)}
		}
	}
	if s.err != nil {
		return nil, &remote.UnreachableError{Host: t.host.Name, Err: s.err}
	}
	return s, nil
}

// start makes a pod from the template, waits until it is ready (bounded
// by ReadyTimeout and ctx) and returns it with an executor that reaches
// it. A pod that does not become ready is deleted, and the error names
// its status.
func (t *Template) start(ctx context.Context) (ns, name string, ex *remote.Executor, err error) {
	m, err := readTemplate(t.host.Template)
	if err != nil {
		return "", "", nil, err
	}
	meta, _ := m["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
		m["metadata"] = meta
	}
	ns = t.host.Namespace
	if v, _ := meta["namespace"].(string); v != "" {
		ns = v
	}
	t.sweep.Do(func() {
		sctx, cancel := context.WithTimeout(ctx, deleteTimeout)
		defer cancel()
		t.removeStale(sctx, ns)
	})
	if name, err = t.create(ctx, m, ns); err != nil {
		return "", "", nil, err
	}
	fail := func(err error) (string, string, *remote.Executor, error) {
		dctx, cancel := context.WithTimeout(context.Background(), deleteTimeout)
		defer cancel()
		t.base.deletePod(dctx, ns, name, "")
		return "", "", nil, err
	}
	if err := t.base.waitReady(ctx, ns, name); err != nil {
		return fail(err)
	}
	ro := t.opts.Executor
	ro.Cwd = t.host.Cwd
	if ex, err = remote.New(t.host.Name, t.base.forPod(ns, name), &ro); err != nil {
		return fail(err)
	}
	return ns, name, ex, nil
}

// nameChars are those of the API server's generateName suffixes: no
// vowels, no look-alikes.
const nameChars = "bcdfghjklmnpqrstvwxz2456789"

// podName is a name for a pod: prefix and 8 random nameChars.
func podName(prefix string) string {
	var b [8]byte
	rand.Read(b[:])
	for i := range b {
		b[i] = nameChars[int(b[i])%len(nameChars)]
	}
	return prefix + string(b[:])
}

// create makes a pod from the manifest m in namespace ns and returns its
// name. conch names the pod (the manifest's generateName, else its name
// and "-", else "conch-", and 8 random characters), not the API server:
// a pod whose creation's answer was lost (ctx ended while the POST was
// under way) is known by name, and deleted.
func (t *Template) create(ctx context.Context, m map[string]any, ns string) (string, error) {
	meta := m["metadata"].(map[string]any) // start made it
	prefix, _ := meta["generateName"].(string)
	if prefix == "" {
		if n, _ := meta["name"].(string); n != "" {
			prefix = n + "-"
		} else {
			prefix = "conch-"
		}
	}
	delete(meta, "generateName")
	meta["namespace"] = ns
	labels, _ := meta["labels"].(map[string]any)
	if labels == nil {
		labels = map[string]any{}
		meta["labels"] = labels
	}
	labels[managedByLabel] = ManagedBy
	annotations, _ := meta["annotations"].(map[string]any)
	if annotations == nil {
		annotations = map[string]any{}
		meta["annotations"] = annotations
	}
	annotations[TemplateAnnotation] = t.host.Name
	annotations[ServerAnnotation] = serverID()
	// A command in the pod must not reach the API server with the pod's
	// service account (a client of the control plane conch itself drives):
	// no token is mounted unless the manifest asks for one.
	spec := m["spec"].(map[string]any) // readTemplate checked it
	if _, set := spec["automountServiceAccountToken"]; !set {
		spec["automountServiceAccountToken"] = false
	}
	for try := 0; ; try++ {
		name := podName(prefix)
		meta["name"] = name
		body, err := json.Marshal(m)
		if err != nil {
			return "", fmt.Errorf("pod template: %w", err)
		}
		// Bounded: the REST client has no timeout of its own, and an API
		// server that takes a request and never answers would hold the
		// owner's first command (and its later ones) for good.
		pctx, cancel := context.WithTimeout(ctx, createTimeout)
		err = t.base.client.Post().Resource("pods").Namespace(ns).Body(body).Do(pctx).Error()
		lost := pctx.Err() != nil
		cancel()
		switch {
		case err == nil:
			return name, nil
		case apierrors.IsAlreadyExists(err) && try < 3 && ctx.Err() == nil:
			continue // a name some other pod has: another draw
		}
		var status apierrors.APIStatus
		if lost || !errors.As(err, &status) {
			// No answer: the pod may have been made. It is deleted now,
			// and again at Close, when a POST still under way at the API
			// server has surely ended.
			t.mu.Lock()
			t.orphans[ns+"/"+name] = true
			t.mu.Unlock()
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deleteTimeout)
			t.base.deleteNow(dctx, ns, name, "")
			cancel()
		}
		switch {
		case ctx.Err() != nil:
			return "", fmt.Errorf("create a pod from %s: %w", t.host.Template, context.Cause(ctx))
		case lost:
			return "", fmt.Errorf("create a pod from %s: no answer from the API server within %v", t.host.Template, createTimeout)
		}
		return "", fmt.Errorf("create a pod from %s: %w", t.host.Template, err)
	}
}
