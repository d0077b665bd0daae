//go:build linux

package egress

import (
	"os"
	"strings"
)

// ResolverAddr is the nameserver a session's /etc/resolv.conf names. Any
// address would do: the session answers every query to port 53 itself.
const ResolverAddr = "198.18.0.2"

// ResolvConf is the /etc/resolv.conf of a session's namespace: the
// session's resolver, and the host's search domains and options (read
// from hostFile, "/etc/resolv.conf"), so that short names resolve as
// they do on the host.
func ResolvConf(hostFile string) string {
	var b strings.Builder
	b.WriteString("# conch: names resolve through the session's network policy (docs/sandbox.md#network)\n")
	b.WriteString("nameserver " + ResolverAddr + "\n")
	data, _ := os.ReadFile(hostFile)
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && (f[0] == "search" || f[0] == "domain" || f[0] == "options") {
			b.WriteString(strings.Join(f, " ") + "\n")
		}
	}
	return b.String()
}
