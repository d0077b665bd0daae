package container

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/conch-dev/conch/internal/serverid"
)

// A template's containers are removed when their owner ends or their
// Template is closed. A conch killed with SIGKILL (or a machine that lost
// power) does neither: its containers, which only wait to be removed,
// would live until the engine stops. So each container carries the
// identity of the conch that started it (ServerLabel: this machine's
// hostname and boot, the process's pid and start time), and a Template
// removes, before it starts its first container, those of conch
// processes of this machine that no longer run. A pid alone could have
// been reused by another process since; with its start time it cannot.
// Containers of another machine (an engine several machines reach) are
// left to their own conch.

var (
	serverOnce sync.Once
	serverVal  string
)

// serverID is this process's ServerLabel: "<hostname>/<boot id>/<pid>/<start
// time>". Where the system has no /proc (no boot id), the boot and start
// are empty and no container is ever found dead.
func serverID() string {
	serverOnce.Do(func() {
		pid := os.Getpid()
		serverVal = fmt.Sprintf("%s/%s/%d/%s", serverid.Hostname(), serverid.BootID(), pid, serverid.StartTime(pid))
	})
	return serverVal
}

// deadServer reports whether the label value id names a conch process of
// this machine that no longer runs: one of an earlier boot, or whose pid
// runs no process started when it was.
func deadServer(id string) bool {
	f := strings.Split(id, "/")
	if len(f) != 4 || f[1] == "" || f[3] == "" {
		return false
	}
	me := strings.Split(serverID(), "/")
	if f[0] != me[0] || me[1] == "" {
		return false // another machine's, or no way to tell here
	}
	if f[1] != me[1] {
		return true // started before this machine's boot
	}
	pid, err := strconv.Atoi(f[2])
	if err != nil || pid <= 0 {
		return false
	}
	return serverid.StartTime(pid) != f[3]
}

// psFormat prints each container's name and ServerLabel, by engine.
var psFormat = map[string]string{
	"podman": `{{.Names}} {{index .Labels "` + ServerLabel + `"}}`,
	"docker": `{{.Names}} {{.Label "` + ServerLabel + `"}}`,
}

// removeStale removes the containers of dead conch processes (deadServer)
// that the engine lists. It is best effort: an engine that cannot list
// them leaves them, and the start that follows says what is wrong with
// the engine.
func (t *Template) removeStale(ctx context.Context) {
	args := append([]string{}, t.opts.EngineArgs...)
	out, err := t.engine(ctx, append(args, "ps", "-a", "--filter", "label="+ServerLabel, "--format", psFormat[t.host.Engine])...)
	if err != nil {
		return
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		name, id, ok := strings.Cut(strings.TrimSpace(line), " ")
		if ok && deadServer(id) {
			t.remove(name)
		}
	}
}
