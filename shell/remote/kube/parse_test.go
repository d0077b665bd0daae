package kube

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestParseTarget: a host's kubernetes value is namespace/pod with an
// optional container, nothing else.
func TestParseTarget(t *testing.T) {
	for in, want := range map[string][3]string{"dev/box": {"dev", "box", ""}, "dev/box/main": {"dev", "box", "main"}} {
		ns, pod, c, err := ParseTarget(in)
		if err != nil || [3]string{ns, pod, c} != want {
			t.Errorf("ParseTarget(%q) = %q %q %q, %v; want %q", in, ns, pod, c, err, want)
		}
	}
	for _, in := range []string{"", "box", "/box", "dev/", "dev/box/", "a/b/c/d"} {
		if _, _, _, err := ParseTarget(in); err == nil || !strings.Contains(err.Error(), "must be <namespace>/<pod>[/<container>]") {
			t.Errorf("ParseTarget(%q): %v, want it refused", in, err)
		}
	}
}

// TestReadTemplate: a template is a Pod manifest, YAML or JSON; another
// kind, another version or no spec is refused naming the file.
func TestReadTemplate(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(text), 0o644)
		return p
	}
	m, err := readTemplate(write("ok.yaml", "apiVersion: v1\nkind: Pod\nmetadata:\n  generateName: x-\nspec:\n  containers:\n  - name: main\n    image: busybox\n"))
	if err != nil || m["kind"] != "Pod" || m["spec"] == nil {
		t.Errorf("a YAML pod: %v, %v", m, err)
	}
	for text, want := range map[string]string{
		"kind: Deployment\nspec: {}\n": `kind "Deployment": want a Pod`,
		"apiVersion: v2\nspec: {}\n":   `apiVersion "v2": want v1`,
		"kind: Pod\n":                  "no spec",
		"- a\n":                        "not a manifest object",
	} {
		p := write("bad.yaml", text)
		if _, err := readTemplate(p); err == nil || !strings.Contains(err.Error(), "pod template "+p+": "+want) {
			t.Errorf("%q: %v, want %q", text, err, want)
		}
	}
}

// TestDescribe: a pod's status in a line names its phase and why its
// containers do not run; a container waiting for an image it may not
// pull is a pod that cannot become ready.
func TestDescribe(t *testing.T) {
	var p pod
	json.Unmarshal([]byte(`{"status":{"phase":"Pending","conditions":[{"type":"Ready","status":"False","reason":"ContainersNotReady"}],
		"containerStatuses":[{"name":"main","state":{"waiting":{"reason":"ErrImageNeverPull","message":"Container image \"x\" is not present with pull policy of Never"}}}]}}`), &p)
	want := `Pending; container main waiting: ErrImageNeverPull: Container image "x" is not present with pull policy of Never`
	if got := p.describe(); got != want || p.ready() || !p.failed() {
		t.Errorf("describe = %q (ready %v, failed %v), want %q, not ready, failed", got, p.ready(), p.failed(), want)
	}
	var empty pod
	if got := empty.describe(); got != "no status yet" || empty.failed() {
		t.Errorf("a pod with no status: %q, failed %v", got, empty.failed())
	}
}
