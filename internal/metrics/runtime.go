package metrics

import (
	"bytes"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// runtimeFamilies are the Go runtime's and the process's own series,
// named as Prometheus's client library names them (go_*, process_*), so
// that dashboards made for any Go program read them.
func runtimeFamilies() []family {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	var gc debug.GCStats
	gc.PauseQuantiles = make([]time.Duration, 5)
	debug.ReadGCStats(&gc)
	threads, _ := runtime.ThreadCreateProfile(nil)

	gcQuantiles := family{name: "go_gc_duration_seconds", kind: "summary", help: "A summary of the wall-time pause (stop-the-world) duration in garbage collection cycles."}
	for i, q := range []string{"0", "0.25", "0.5", "0.75", "1"} {
		gcQuantiles.samples = append(gcQuantiles.samples, sample{labels: []string{"quantile", q}, value: gc.PauseQuantiles[i].Seconds()})
	}
	gcQuantiles.samples = append(gcQuantiles.samples,
		sample{suffix: "_sum", value: gc.PauseTotal.Seconds()},
		sample{suffix: "_count", value: float64(gc.NumGC)})

	fams := []family{
		gcQuantiles,
		single("go_goroutines", "gauge", "Number of goroutines that currently exist.", float64(runtime.NumGoroutine())),
		{name: "go_info", kind: "gauge", help: "Information about the Go environment.", samples: []sample{{labels: []string{"version", runtime.Version()}, value: 1}}},
		single("go_memstats_alloc_bytes", "gauge", "Number of heap bytes allocated and currently in use.", float64(ms.Alloc)),
		single("go_memstats_alloc_bytes_total", "counter", "Total number of heap bytes allocated, even if freed.", float64(ms.TotalAlloc)),
		single("go_memstats_frees_total", "counter", "Total number of heap objects frees.", float64(ms.Frees)),
		single("go_memstats_heap_alloc_bytes", "gauge", "Number of heap bytes allocated and currently in use.", float64(ms.HeapAlloc)),
		single("go_memstats_heap_idle_bytes", "gauge", "Number of heap bytes waiting to be used.", float64(ms.HeapIdle)),
		single("go_memstats_heap_inuse_bytes", "gauge", "Number of heap bytes that are in use.", float64(ms.HeapInuse)),
		single("go_memstats_heap_objects", "gauge", "Number of currently allocated objects.", float64(ms.HeapObjects)),
		single("go_memstats_heap_released_bytes", "gauge", "Number of heap bytes released to OS.", float64(ms.HeapReleased)),
		single("go_memstats_heap_sys_bytes", "gauge", "Number of heap bytes obtained from system.", float64(ms.HeapSys)),
		single("go_memstats_last_gc_time_seconds", "gauge", "Number of seconds since 1970 of last garbage collection.", float64(ms.LastGC)/1e9),
		single("go_memstats_mallocs_total", "counter", "Total number of heap objects allocated, both live and gc-ed.", float64(ms.Mallocs)),
		single("go_memstats_next_gc_bytes", "gauge", "Number of heap bytes when next garbage collection will take place.", float64(ms.NextGC)),
		single("go_memstats_stack_inuse_bytes", "gauge", "Number of bytes obtained from system for stack allocator in non-CGO environments.", float64(ms.StackInuse)),
		single("go_memstats_sys_bytes", "gauge", "Number of bytes obtained from system.", float64(ms.Sys)),
		single("go_threads", "gauge", "Number of OS threads created.", float64(threads)),
	}
	return append(fams, processFamilies()...)
}

// processFamilies are the process's CPU time, descriptors and memory, read
// from the kernel; a series it cannot read is left out.
func processFamilies() []family {
	var fams []family
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) == nil {
		cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		fams = append(fams, single("process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.", cpu.Seconds()))
	}
	if fds, err := os.ReadDir("/proc/self/fd"); err == nil {
		fams = append(fams, single("process_open_fds", "gauge", "Number of open file descriptors.", float64(len(fds)-1))) // less ReadDir's own
	}
	var rl unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &rl) == nil {
		fams = append(fams, single("process_max_fds", "gauge", "Maximum number of open file descriptors.", float64(rl.Cur)))
	}
	if b, err := os.ReadFile("/proc/self/statm"); err == nil {
		if f := bytes.Fields(b); len(f) >= 2 {
			page := float64(os.Getpagesize())
			size, _ := strconv.ParseFloat(string(f[0]), 64)
			rss, _ := strconv.ParseFloat(string(f[1]), 64)
			fams = append(fams,
				single("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.", size*page),
				single("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.", rss*page))
		}
	}
	fams = append(fams, single("process_start_time_seconds", "gauge", "Start time of the process since unix epoch in seconds.", float64(processStart.UnixNano())/1e9))
	return fams
}

// processStart is when this package was initialised: the process's start
// within the few milliseconds its initialisation takes.
var processStart = time.Now()
