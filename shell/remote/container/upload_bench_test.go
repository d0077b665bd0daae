//go:build linux

package container

import (
	"os"
	"slices"
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/containertest"
	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/shell/remote"
)

// BenchmarkUpload: the upload of the agent into a podman container over
// `podman exec -i` stdin (to a temporary file, its sha256 checked, renamed
// into place), the binary removed before each; against `podman exec -i
// … cat > /dev/null` of the same bytes.
//
//	go test -run '^$' -bench Upload -benchtime 10x ./shell/remote/container/
func BenchmarkUpload(b *testing.B) {
	engine := containertest.Podman(b)
	bin := testutil.ConchBinary(b)
	ctr := containertest.Start(b, engine, containertest.Image(b, engine, bin))
	d, err := NewDialer(Host{Name: "box", Engine: "podman", Container: ctr}, &Options{AgentBinary: bin})
	if err != nil {
		b.Fatal(err)
	}
	dep, err := remote.Probe(b.Context(), "box", d.run, d.binHash)
	if err != nil {
		b.Fatal(err)
	}
	var up, cat []time.Duration
	b.ResetTimer()
	for range b.N {
		if _, err := d.run(b.Context(), "rm -f "+remote.ShellQuote(dep.Path), nil); err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		if err := dep.Upload(b.Context(), d.run, bin, d.binHash); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		f := openB(b, bin)
		if _, err := d.run(b.Context(), "cat > /dev/null", f); err != nil {
			b.Fatal(err)
		}
		f.Close()
		up, cat = append(up, t1.Sub(t0)), append(cat, time.Since(t1))
	}
	b.StopTimer()
	u, c := median(up), median(cat)
	b.ReportMetric(float64(u.Milliseconds()), "upload-p50-ms")
	b.ReportMetric(float64(c.Milliseconds()), "exec-cat-p50-ms")
	b.ReportMetric(float64(u)/float64(c), "upload/cat")
	b.ReportMetric(float64(sizeB(b, bin))/1e6, "binary-MB")
}

func openB(b *testing.B, path string) *os.File {
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	return f
}

func sizeB(b *testing.B, path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	return fi.Size()
}

func median(d []time.Duration) time.Duration {
	slices.Sort(d)
	return d[len(d)/2]
}
