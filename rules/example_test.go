package rules_test

import (
	"fmt"

	"github.com/conch-dev/conch/rules"
)

// Rules are parsed once from their deny, ask and allow lists (the forms of
// Claude Code's permission rules) and what happens to an unmatched command;
// then each command line is checked before it runs.
func Example() {
	r, err := rules.Parse(
		[]string{"Bash(rm -rf:*)"},
		[]string{"Bash(git push:*)"},
		[]string{"Bash(ls:*)", "Bash(git status)"},
		"ask",
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, line := range []string{
		"ls -la",
		"git status && git push origin main",
		"cd /tmp; rm -rf build",
		"make",
	} {
		d := r.Check(line)
		fmt.Printf("%-36q %s: %s\n", line, d.Verdict, d.Why())
	}
	// Output:
	// "ls -la"                             allow: rule Bash(ls:*)
	// "git status && git push origin main" ask: rule Bash(git push:*)
	// "cd /tmp; rm -rf build"              deny: rule Bash(rm -rf:*)
	// "make"                               ask: no rule matches
}
