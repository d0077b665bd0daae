//go:build linux

package shelltest

import (
	"context"
	"io/fs"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/conch-dev/conch/shell"
)

// cases are the suite, in the order they are started.
var cases = []testCase{
	{name: "EchoAndExitCodes", run: testEchoAndExitCodes},
	{name: "CwdDefaultAndOverride", run: testCwdDefaultAndOverride},
	{name: "MissingWorkdirIsInfrastructureError", run: testMissingWorkdirIsInfrastructureError},
	{name: "WorkdirWithoutPermission", run: testWorkdirWithoutPermission},
	{name: "ResolveRefusesBadRequests", run: testResolveRefusesBadRequests},
	{name: "TimeoutClampedAndReported", run: testTimeoutClampedAndReported},
	{name: "TimeoutCancelSelfSignal", run: testTimeoutCancelSelfSignal},
	{name: "AbortedBeforeSpawn", run: testAbortedBeforeSpawn},
	{name: "TermTrapIsKilledAfterGrace", run: testTermTrapIsKilledAfterGrace},
	{name: "TrappedTermExitZeroIsTimedOut", run: testTrappedTermExitZeroIsTimedOut},
	{name: "Stdin", run: testStdin},
	{name: "EnvironmentScrubAndOrder", run: testEnvironmentScrubAndOrder},
	{name: "PythonOutputWhileRunning", run: testPythonOutputWhileRunning},
	{name: "BackgroundGrandchildDoesNotHang", run: testBackgroundGrandchildDoesNotHang},
	{name: "LeftRunning", run: testLeftRunning},
	{name: "StreamCapExactAndOneOver", run: testStreamCapExactAndOneOver},
	{name: "SpillDeletedPastCap", run: testSpillDeletedPastCap},
	{name: "SpillDirRemovedAtClose", run: testSpillDirRemovedAtClose},
	{name: "OutputFacts", run: testOutputFacts},
	{name: "BackgroundReads", run: testBackgroundReads},
	{name: "BackgroundLossyRead", run: testBackgroundLossyRead},
	{name: "PeekDoesNotConsume", run: testPeekDoesNotConsume},
	{name: "KillTrueThenFalse", run: testKillTrueThenFalse},
	{name: "KilledStaysKilledAfterTrappedExitZero", run: testKilledStaysKilledAfterTrappedExitZero},
	{name: "SelfSignalInBackgroundIsKilled", run: testSelfSignalInBackgroundIsKilled},
	{name: "CloseKillsAndRefuses", run: testCloseKillsAndRefuses},
	{name: "Leftovers", run: testLeftovers},
	{name: "LeftoverForkLoop", run: testLeftoverForkLoop},
	{name: "KillLeftoversAtDone", run: testKillLeftoversAtDone},
	{name: "BinaryOutput", run: testBinaryOutput},
	{name: "TerminalIsControlling", run: testTerminalIsControlling},
	{name: "TerminalInterrupt", run: testTerminalInterrupt},
	{name: "TerminalPrompts", run: testTerminalPrompts},
	{name: "TerminalKillTakesAll", run: testTerminalKillTakesAll, serial: true},
	{name: "GarbageNeverBreaksCapture", run: testGarbageNeverBreaksCapture, serial: true},
	{name: "NoByteLostWhenTheDrainIsCut", run: testNoByteLostWhenTheDrainIsCut, serial: true},
}

// MustRun resolves r on ex and runs it with shell.Run, failing t on an
// error.
func MustRun(t *testing.T, ex shell.Executor, r shell.Request) shell.Result {
	t.Helper()
	return MustRunContext(t, context.Background(), ex, r)
}

// MustRunContext is MustRun with ctx.
func MustRunContext(t *testing.T, ctx context.Context, ex shell.Executor, r shell.Request) shell.Result {
	t.Helper()
	spec, err := ex.Resolve(r)
	if err != nil {
		t.Fatalf("Resolve(%+v): %v", r, err)
	}
	res, err := shell.Run(ctx, ex, spec)
	if err != nil {
		t.Fatalf("Run(%q): %v", r.Command, err)
	}
	return res
}

// MustStart resolves r on ex and starts it in the background, failing t
// on an error.
func MustStart(t *testing.T, ex shell.Executor, r shell.Request) shell.Process {
	t.Helper()
	spec, err := ex.Resolve(r)
	if err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	p, err := ex.Start(spec)
	if err != nil {
		t.Fatalf("Start(%q): %v", r.Command, err)
	}
	return p
}

// SpillFiles lists the files under dir (an executor's SpillParent), at
// any depth: the spill directory holds a subdirectory per owner
// (docs/executor.md#spill-files), which is not a spill file.
func SpillFiles(dir string) []string {
	var files []string
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, path)
		}
		return nil
	})
	return files
}

// ExitCode is r's exit code, -1 when a signal ended it.
func ExitCode(r shell.Result) int {
	if r.ExitCode == nil {
		return -1
	}
	return *r.ExitCode
}

// WaitDone waits at most d for p (a shell.Process, a shell.Terminal) to
// be done, failing t after.
func WaitDone(t *testing.T, p interface{ Done() <-chan struct{} }, d time.Duration) {
	t.Helper()
	select {
	case <-p.Done():
	case <-time.After(d):
		t.Fatalf("process not done after %v", d)
	}
}

// ReadUntil reads p until what it read so far satisfies ok, for at most
// 5 s.
func ReadUntil(t *testing.T, p shell.Process, ok func(shell.ReadResult) bool) shell.ReadResult {
	t.Helper()
	var acc shell.ReadResult
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		r := p.Read()
		acc.Stdout += r.Stdout
		acc.Stderr += r.Stderr
		acc.Lossy = acc.Lossy || r.Lossy
		if ok(acc) {
			return acc
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("condition not met; read so far %+v", acc)
	return acc
}

// BurnCPU keeps n goroutines spinning until the test ends, to starve the
// goroutines that read the pipes.
func BurnCPU(t *testing.T, n int) {
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for x := 0; !stop.Load(); x++ {
				if x%1024 == 0 {
					runtime.Gosched()
				}
			}
		})
	}
	t.Cleanup(func() { stop.Store(true); wg.Wait() })
}
