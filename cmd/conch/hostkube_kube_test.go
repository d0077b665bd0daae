//go:build linux && kube

package main

import (
	"flag"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestKubeHostsBuild: a target that is not namespace/pod[/container], a
// context for a host that is not a Kubernetes host and a context the
// kubeconfig lacks are refused when the hosts are built.
func TestKubeHostsBuild(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	os.WriteFile(kubeconfig, []byte("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:1\n"+
		"contexts:\n- name: c\n  context:\n    cluster: c\n    user: u\nusers:\n- name: u\n  user:\n    token: x\ncurrent-context: c\n"), 0o600)
	t.Setenv("KUBECONFIG", kubeconfig)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--host-kubernetes", "k=box"}, `host k: kubernetes: "box" must be <namespace>/<pod>[/<container>]`},
		{[]string{"--host", "s=me@h", "--host-context", "s=prod"}, "--host-context s: no Kubernetes host s is configured"},
		{[]string{"--host-kubernetes", "k=dev/box", "--host-context", "k=nope"}, `host k: kubeconfig: context "nope" does not exist`},
	} {
		var cfg config
		fs := flag.NewFlagSet("conch serve", flag.ContinueOnError)
		cfg.addFlags(fs, 0, slog.LevelInfo)
		if err := fs.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		if _, err := cfg.build(nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.args, err, c.want)
		}
	}
}
