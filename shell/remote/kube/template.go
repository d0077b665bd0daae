package kube

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"path"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

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
// Template is a remote.Owners (shell.Executor, shell.ContextLauncher,
// shell.OwnerEnder, shell.Terminals) whose instances are pods; it is safe
// for concurrent use.
type Template struct {
	*remote.Owners
	host  Host
	opts  Options
	base  *Dialer // the kubeconfig, REST client and checksum the pods' dialers share
	sweep sync.Once

	mu      sync.Mutex
	orphans map[string]bool // "ns/name" of pods whose creation's answer was lost
}

// podInstance is one owner's pod.
type podInstance struct {
	t        *Template
	ns, name string
	ex       *remote.Executor
}

func (p *podInstance) Executor() *remote.Executor { return p.ex }
func (p *podInstance) Name() string               { return p.ns + "/" + p.name }

// Running reports whether the pod is there and not being deleted; an API
// server that cannot say is taken to mean it is.
func (p *podInstance) Running() bool {
	ctx, cancel := context.WithTimeout(context.Background(), deleteTimeout)
	defer cancel()
	raw, err := p.t.base.client.Get().Resource("pods").Namespace(p.ns).Name(p.name).Do(ctx).Raw()
	if err != nil {
		return !apierrors.IsNotFound(err)
	}
	var pd pod
	if json.Unmarshal(raw, &pd) != nil {
		return true
	}
	return pd.Metadata.DeletionTimestamp == nil && !pd.failed()
}

// Remove deletes the pod and waits until the API server no longer has
// it.
func (p *podInstance) Remove() error {
	ctx, cancel := context.WithTimeout(context.Background(), deleteTimeout)
	defer cancel()
	if err := p.t.base.deletePod(ctx, p.ns, p.name, ""); err != nil {
		return fmt.Errorf("host %s: %w", p.t.host.Name, err)
	}
	return nil
}

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
	t := &Template{host: h, opts: d.opts, base: d, orphans: map[string]bool{}}
	t.Owners = remote.NewOwners(h.Name, l, t.start)
	return t, nil
}

// Name is the host's name.
func (t *Template) Name() string { return t.host.Name }

// Pods are the "namespace/name" of the pods made for owners now.
func (t *Template) Pods() []string { return t.Instances() }

// Close implements shell.Executor: the pods being made are given up,
// every owner's pod is ended as by EndOwner, in parallel, and the pods
// whose creation's answer was lost are deleted too.
func (t *Template) Close() error {
	err := t.Owners.Close()
	all := []error{err}
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

// start makes a pod from the template, waits until it is ready (bounded
// by ReadyTimeout and ctx) and returns it with an executor that reaches
// it. A pod that does not become ready is deleted, and the error names
// its status.
func (t *Template) start(ctx context.Context) (remote.Instance, error) {
	m, err := readTemplate(t.host.Template)
	if err != nil {
		return nil, err
	}
	meta, _ := m["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
		m["metadata"] = meta
	}
	ns := t.host.Namespace
	if v, _ := meta["namespace"].(string); v != "" {
		ns = v
	}
	t.sweep.Do(func() {
		sctx, cancel := context.WithTimeout(ctx, deleteTimeout)
		defer cancel()
		t.removeStale(sctx, ns)
	})
	name, err := t.create(ctx, m, ns)
	if err != nil {
		return nil, err
	}
	p := &podInstance{t: t, ns: ns, name: name}
	if err := t.base.waitReady(ctx, ns, name); err != nil {
		p.Remove()
		return nil, err
	}
	ro := t.opts.Executor
	ro.Cwd = t.host.Cwd
	if p.ex, err = remote.New(t.host.Name, t.base.forPod(ns, name), &ro); err != nil {
		p.Remove()
		return nil, err
	}
	return p, nil
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
		var (
			status apierrors.APIStatus
			op     *net.OpError
		)
		sent := !errors.As(err, &op) || op.Op != "dial" // a refused dial sent nothing
		if lost || (sent && !errors.As(err, &status)) {
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
