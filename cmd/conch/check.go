package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	cfgfile "github.com/conch-dev/conch/internal/config"
	"github.com/conch-dev/conch/internal/sandbox"
	"github.com/conch-dev/conch/rules"
)

const checkUsage = `Usage: conch check [--config FILE] [--] <command line>...

Decide a command line with the permission rules of the configuration file
and of the current directory's project file (.conch/config.toml), as the
bash tool would before running it in a session there, and run nothing. The words after
the flags are joined with spaces into one command line; quote it:
conch check -- 'git status && git push'.

Output (stdout): the decision (allow, ask or deny) alone on the first
line, then each simple command found, one a line, then the deciding rule
or reason and, after ": ", the deciding simple command. A newline inside
a command is shown as \n. Last come the sandbox keys of the project file,
one a line with where it was written (sandbox.mode = "read-only"  #
.conch/config.toml:3): the narrower sandbox a session there runs in. A
project key that would widen the sandbox of the configuration file is a
bad configuration.

Exit status:
  0   allow
  3   ask
  4   deny
  2   a usage error or a bad configuration file

Flags:
`

// checkExit is conch check's exit status for each verdict.
var checkExit = map[rules.Verdict]int{rules.Allow: 0, rules.Ask: 3, rules.Deny: 4}

func checkCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("conch check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, checkUsage)
		fs.PrintDefaults()
	}
	fs.String("config", "", "the configuration file (default: "+cfgfile.DefaultPath()+")")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	line := strings.Join(fs.Args(), " ")
	if strings.TrimSpace(line) == "" {
		fmt.Fprintln(stderr, "conch check: no command line")
		fs.Usage()
		return 2
	}
	path, explicit := configPath(args)
	var entries []cfgfile.Entry
	if path != "" {
		var err error
		if entries, err = cfgfile.Load(path, !explicit); err != nil {
			fmt.Fprintf(stderr, "conch check: %v\n", err)
			return 2
		}
	}
	var proj *cfgfile.Project
	r, err := cfgfile.Rules(entries)
	if err == nil {
		if proj, err = cfgfile.LoadProjectConfig("."); err == nil {
			r = cfgfile.Narrow(r, proj.Rules)
			err = proj.CheckSandbox(fileSandbox(entries))
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "conch check: %v\n", err)
		return 2
	}
	d := r.Check(line)
	oneLine := strings.NewReplacer("\n", `\n`)
	fmt.Fprintln(stdout, d.Verdict)
	for _, c := range d.Commands {
		fmt.Fprintln(stdout, oneLine.Replace(c.Text))
	}
	if d.Command != "" {
		fmt.Fprintf(stdout, "%s: %s\n", d.Why(), oneLine.Replace(d.Command))
	} else {
		fmt.Fprintln(stdout, d.Why())
	}
	for _, e := range proj.Entries {
		if strings.HasPrefix(e.Key, "sandbox.") {
			fmt.Fprintf(stdout, "%s = %s  # %s\n", e.Key, entryValue(e), e.Where())
		}
	}
	return checkExit[d.Verdict]
}

// fileSandbox is the sandbox mode and network of a user's file's
// entries (the defaults where it sets none), which a project file may
// only narrow, and no cause of unavailability: check runs nothing.
func fileSandbox(entries []cfgfile.Entry) (sandbox.Mode, sandbox.Network, string) {
	mode, network := sandbox.WorkspaceWrite, sandbox.NetworkPublic
	for _, e := range entries {
		switch {
		case e.Key == "sandbox.mode" && !e.Array:
			mode = sandbox.Mode(e.Values[0])
		case (e.Key == "sandbox.network" || e.Key == "sandbox.network.mode") && !e.Array:
			network = sandbox.Network(e.Values[0])
		}
	}
	return mode, network, ""
}
