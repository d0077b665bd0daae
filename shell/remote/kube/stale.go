package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/conch-dev/conch/internal/serverid"
)

// A template's pods are deleted when their session ends or their
// Template is closed. A conch killed with SIGKILL (or a machine that lost
// power) does neither: its pods, which only wait to be deleted, would
// run until someone deletes them. So each pod carries the identity of
// the conch that made it (the annotation ServerAnnotation: this
// machine's hostname, machine id and boot, the process's pid and start
// time), and a Template deletes, before it makes its first pod, the pods
// of its namespace made by conch processes of this machine that no
// longer run. An annotation, not a label: a label's value is at most 63
// characters of a few kinds, and the identity is longer.
//
// A pod is of this machine only when its hostname and machine id are
// this machine's: a cluster is reached from many machines, some of the
// same hostname, and from containers on this one (the same kernel, so
// the same boot id, with pids of their own); their conch processes' pods
// are left to them. One made in this boot names a dead process when its
// pid runs no process started when it was; one made in an earlier boot
// is dead. Where this machine has no machine id, only the pods of this
// boot are swept.

// Annotations of a template's pods: the host they serve, and the conch
// process that made them (ServerAnnotation), by which a later conch finds
// the pods of a conch that died without deleting them. The pods carry
// the label app.kubernetes.io/managed-by=conch (ManagedBy) too.
const (
	TemplateAnnotation = "conch.template"
	ServerAnnotation   = "conch.server"
)

var (
	serverOnce sync.Once
	serverVal  string
)

// serverID is this process's ServerAnnotation: "<hostname>/<machine
// id>/<boot id>/<pid>/<start time>". Where the system has no /proc (no
// boot id), the boot and start are empty and no pod is ever found dead.
func serverID() string {
	serverOnce.Do(func() {
		pid := os.Getpid()
		serverVal = fmt.Sprintf("%s/%s/%s/%d/%s", serverid.Hostname(), serverid.MachineID(), serverid.BootID(), pid, serverid.StartTime(pid))
	})
	return serverVal
}

// deadServer reports whether id (a ServerAnnotation) names a conch
// process of this machine that no longer runs.
func deadServer(id string) bool {
	f := strings.Split(id, "/")
	if len(f) != 5 || f[2] == "" || f[4] == "" {
		return false
	}
	me := strings.Split(serverID(), "/")
	if me[2] == "" {
		return false // no way to tell here
	}
	if f[0] != me[0] || f[1] != me[1] {
		// Another machine's; or, in this boot, a container's on this
		// machine (the same kernel, so the same boot id, but its own
		// hostname and its own pids: one of its live conch processes
		// would seem gone here).
		return false
	}
	if f[2] != me[2] {
		return me[1] != "" // an earlier boot of this machine, known by its machine id
	}
	pid, err := strconv.Atoi(f[3])
	if err != nil || pid <= 0 {
		return false
	}
	return serverid.StartTime(pid) != f[4]
}

// removeStale deletes the pods of namespace ns that conch made
// (ManagedBy) for conch processes that no longer run (deadServer), at
// once and side by side, and waits until they are gone. It is best
// effort: an API server that cannot list them leaves them, and the
// creation that follows says what is wrong.
func (t *Template) removeStale(ctx context.Context, ns string) {
	raw, err := t.base.client.Get().Resource("pods").Namespace(ns).
		Param("labelSelector", managedByLabel+"="+ManagedBy).Do(ctx).Raw()
	if err != nil {
		return
	}
	var list struct {
		Items []pod `json:"items"`
	}
	if json.Unmarshal(raw, &list) != nil {
		return
	}
	var wg sync.WaitGroup
	for _, p := range list.Items {
		if id := p.Metadata.Annotations[ServerAnnotation]; id != "" && deadServer(id) {
			// The uid: the pod listed, not another of its name made since.
			wg.Go(func() { t.base.deletePod(ctx, ns, p.Metadata.Name, p.Metadata.UID) })
		}
	}
	wg.Wait()
}
