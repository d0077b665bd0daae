//go:build linux

package kubetest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Version is the Kubernetes release whose kube-apiserver and kubelet the
// fixture builds.
const Version = "v1.37.2"

// stagingVersion is the published version of Kubernetes' staging
// modules (k8s.io/api, k8s.io/client-go, …) of Version.
const stagingVersion = "v0.37.2"

// CacheDir is where the built binaries are kept, by version:
// $CONCH_KUBE_CACHE, else /var/cache/conch-test/kube/<Version>.
func CacheDir() string {
	if d := os.Getenv("CONCH_KUBE_CACHE"); d != "" {
		return filepath.Join(d, Version)
	}
	return filepath.Join("/var/cache/conch-test/kube", Version)
}

// Binaries returns the directory that holds kube-apiserver and kubelet
// of Version, building them first when the cache lacks them: from the Go
// module proxy, through a wrapper module that requires
// k8s.io/kubernetes and replaces each of its staging modules (which its
// go.mod points at ./staging, absent from the module's zip) with its
// published version. The build costs about 12.5 CPU-minutes; a lock
// file keeps two test binaries from building at once.
func Binaries() (dir string, built time.Duration, err error) {
	dir = CacheDir()
	if have(dir) {
		return dir, 0, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", 0, fmt.Errorf("kubetest: cache: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", 0, fmt.Errorf("kubetest: cache: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", 0, fmt.Errorf("kubetest: lock the cache: %w", err)
	}
	if have(dir) { // another test binary built them while this one waited
		return dir, 0, nil
	}
	start := time.Now()
	if err := build(dir); err != nil {
		return "", 0, err
	}
	return dir, time.Since(start), nil
}

func have(dir string) bool {
	for _, b := range []string{"kube-apiserver", "kubelet"} {
		if st, err := os.Stat(filepath.Join(dir, b)); err != nil || st.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

// wrapperMain keeps both commands' packages required by the wrapper
// module, so that go mod tidy resolves what they need.
const wrapperMain = `package kubebuild

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver/app"
	_ "k8s.io/kubernetes/cmd/kubelet/app"
)
`

var stagingReplace = regexp.MustCompile(`(?m)^\s*(k8s\.io/[a-z0-9-]+)\s*=>\s*\./staging/`)

func build(dir string) error {
	work, err := os.MkdirTemp("", "conch-kubebuild-")
	if err != nil {
		return fmt.Errorf("kubetest: build: %w", err)
	}
	defer os.RemoveAll(work)
	gomod := func(args ...string) (string, error) {
		cmd := exec.Command("go", args...)
		cmd.Dir = work
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("kubetest: go %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
		}
		return out.String(), nil
	}
	mod := "module conch.test/kubebuild\n\ngo 1.26.0\n\nrequire k8s.io/kubernetes " + Version + "\n"
	if err := os.WriteFile(filepath.Join(work, "go.mod"), []byte(mod), 0o644); err != nil {
		return fmt.Errorf("kubetest: build: %w", err)
	}
	if err := os.WriteFile(filepath.Join(work, "main.go"), []byte(wrapperMain), 0o644); err != nil {
		return fmt.Errorf("kubetest: build: %w", err)
	}
	// k8s.io/kubernetes's own go.mod names its staging modules.
	kmod, err := gomod("mod", "download", "-json", "k8s.io/kubernetes@"+Version)
	if err != nil {
		return err
	}
	m := regexp.MustCompile(`"GoMod": "([^"]+)"`).FindStringSubmatch(kmod)
	if m == nil {
		return fmt.Errorf("kubetest: go mod download named no go.mod of k8s.io/kubernetes")
	}
	kgomod, err := os.ReadFile(m[1])
	if err != nil {
		return fmt.Errorf("kubetest: build: %w", err)
	}
	var rep strings.Builder
	rep.WriteString("\nreplace (\n")
	for _, s := range stagingReplace.FindAllStringSubmatch(string(kgomod), -1) {
		fmt.Fprintf(&rep, "\t%s => %s %s\n", s[1], s[1], stagingVersion)
	}
	rep.WriteString(")\n")
	if err := os.WriteFile(filepath.Join(work, "go.mod"), []byte(mod+rep.String()), 0o644); err != nil {
		return fmt.Errorf("kubetest: build: %w", err)
	}
	if _, err := gomod("mod", "tidy"); err != nil {
		return err
	}
	tmp := filepath.Join(dir, ".build")
	os.RemoveAll(tmp)
	defer os.RemoveAll(tmp)
	if _, err := gomod("build", "-trimpath", "-o", tmp+"/", "k8s.io/kubernetes/cmd/kube-apiserver", "k8s.io/kubernetes/cmd/kubelet"); err != nil {
		return err
	}
	for _, b := range []string{"kube-apiserver", "kubelet"} {
		if err := os.Rename(filepath.Join(tmp, b), filepath.Join(dir, b)); err != nil {
			return fmt.Errorf("kubetest: build: %w", err)
		}
	}
	return nil
}

// The conch binary with the Kubernetes transport, built at most once per
// test binary (KubeConch) and removed by Stop.
var (
	conchOnce sync.Once
	conchDir  string
	conchPath string
	conchErr  error
)

// KubeConch returns cmd/conch built with the Kubernetes transport
// (`go build -tags kube`), the client the tests run as a user would
// (`conch doctor --host`, `conch run`); testutil.ConchBinary is the
// default build, which refuses Kubernetes hosts, and stays the agent the
// tests deploy. The first call builds it; Stop removes it.
func KubeConch(t testing.TB) string {
	t.Helper()
	Enabled(t)
	conchOnce.Do(func() {
		if conchDir, conchErr = os.MkdirTemp("", "conch-kube-bin-"); conchErr != nil {
			return
		}
		if conchErr = os.Chmod(conchDir, 0o755); conchErr != nil {
			return
		}
		conchPath = filepath.Join(conchDir, "conch")
		if out, err := exec.Command("go", "build", "-tags", "kube", "-o", conchPath, "github.com/conch-dev/conch/cmd/conch").CombinedOutput(); err != nil {
			conchErr = fmt.Errorf("kubetest: go build -tags kube cmd/conch: %v\n%s", err, out)
		}
	})
	if conchErr != nil {
		t.Fatal(conchErr)
	}
	return conchPath
}

// removeKubeConch removes what KubeConch built, if anything.
func removeKubeConch() {
	if conchDir != "" {
		os.RemoveAll(conchDir)
	}
}
