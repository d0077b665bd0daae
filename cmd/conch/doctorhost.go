package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"
)

// doctorHostArg takes `--host NAME` (a name, with no "=") out of conch
// doctor's arguments: it asks about that configured host instead of this
// one. `--host NAME=SSH` stays a host's configuration, as for serve.
func doctorHostArg(args []string) (name string, rest []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		switch {
		case (a == "--host" || a == "-host") && i+1 < len(args) && !strings.Contains(args[i+1], "="):
			name = args[i+1]
			rest = append(append(rest, args[:i]...), args[i+2:]...)
			return name, rest
		case strings.HasPrefix(a, "--host=") || strings.HasPrefix(a, "-host="):
			v := a[strings.IndexByte(a, '=')+1:]
			if v != "" && !strings.Contains(v, "=") {
				rest = append(append(rest, args[:i]...), args[i+1:]...)
				return v, rest
			}
		}
	}
	return "", args
}

// doctorHostTimeout bounds conch doctor --host's connection.
const doctorHostTimeout = 60 * time.Second

// doctorHost is `conch doctor --host NAME`: it connects to the configured
// host as conch serve would (deploying the agent there, with the host's
// settings) and prints what the agent said of itself: its conch, its
// working directory, and the containment and sandbox its commands get
// there, each with the cause when the host cannot give them (a container
// whose engine masked /proc says which option unmasks it). It returns 0
// when the agent started, 1 when it could not (its error is the host
// line), 2 when no host of that name is configured.
func doctorHost(ctx context.Context, c *config, name string, stdout, stderr io.Writer) int {
	if !c.hostConfigured(name) {
		fmt.Fprintf(stderr, "conch doctor: --host %s: no host %s is configured\n", name, name)
		return exitUsage
	}
	hosts, exs, err := c.remoteHosts(nil)
	if err != nil {
		fmt.Fprintf(stderr, "conch doctor: %v\n", err)
		return exitUsage
	}
	defer func() {
		for _, ex := range exs {
			ex.Close()
		}
	}()
	for _, th := range c.transportHosts() {
		if th.h.name == name {
			fmt.Fprintf(stdout, "host: %s (%s)\n", name, th.t.describe(th.h))
		}
	}
	for i, h := range hosts {
		if h.Name != name {
			continue
		}
		ctx, cancel := context.WithTimeout(ctx, doctorHostTimeout)
		defer cancel()
		hello, err := exs[i].Hello(ctx)
		if err != nil {
			fmt.Fprintf(stdout, "agent: none (%v)\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "agent: conch %s (%s/%s)\n", hello.Conch, hello.OS, hello.Arch)
		fmt.Fprintf(stdout, "cwd: %s\n", hello.Cwd)
		// Enforces is "<what every command gets>; containment: …; sandbox: …".
		rest, sb, _ := strings.Cut(hello.Enforces, "; sandbox: ")
		_, ct, _ := strings.Cut(rest, "; containment: ")
		fmt.Fprintf(stdout, "containment: %s\nsandbox: %s\n", ct, sb)
	}
	return 0
}
