//go:build linux

package kube_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conch-dev/conch/internal/agent"
	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/shell/remote"
	"github.com/conch-dev/conch/shell/remote/kube"
)

// TestUnreachable: with no API server at the kubeconfig's address (a
// port of 127.0.0.1 nothing listens on), a pod host and a pod_template
// host are the contract's unreachable error, naming the refused
// connection, and nothing is left running. It needs no cluster.
func TestUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // a port nothing listens on: the dial is refused
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	os.WriteFile(kubeconfig, []byte("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://"+addr+"\n    insecure-skip-tls-verify: true\n"+
		"contexts:\n- name: c\n  context:\n    cluster: c\n    user: u\nusers:\n- name: u\n  user:\n    token: x\ncurrent-context: c\n"), 0o600)
	tmpl := filepath.Join(dir, "pod.yaml")
	os.WriteFile(tmpl, []byte("kind: Pod\nspec:\n  containers:\n  - name: main\n    image: x\n"), 0o644)
	for _, h := range []kube.Host{
		{Name: "kt", Namespace: "dev", Pod: "box"},
		{Name: "kt", Template: tmpl},
	} {
		var ex interface {
			Hello(context.Context) (agent.Hello, error)
			Close() error
		}
		var err error
		o := &kube.Options{Kubeconfig: kubeconfig, AgentBinary: "/bin/sh"}
		if h.Template != "" {
			ex, err = kube.NewTemplate(h, o)
		} else {
			ex, err = kube.New(h, o)
		}
		if err != nil {
			t.Fatal(err)
		}
		_, err = ex.Hello(t.Context())
		t.Logf("%s: %v", h.Pod+h.Template, err)
		var ue *remote.UnreachableError
		if !errors.As(err, &ue) || !strings.HasPrefix(err.Error(), "host kt unreachable: ") ||
			!strings.Contains(err.Error(), "connection refused") || !strings.HasSuffix(err.Error(), "; the command did not run") {
			t.Errorf("%+v: %v, want the host unreachable for a refused connection", h, err)
		}
		if err := ex.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}
	testutil.VerifyNoLeaks(t)
}
