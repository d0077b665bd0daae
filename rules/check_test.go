package rules

import (
	"strings"
	"sync"
	"testing"
)

// tableRules are the rules of the case table in the design notes.
func tableRules(t testing.TB) *Rules {
	t.Helper()
	r, err := Parse(
		[]string{"Bash(rm -rf:*)"},
		[]string{"Bash(git push:*)"},
		[]string{"Bash(ls:*)", "Bash(git status)", "Bash(echo:*)"},
		"allow")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestCheckTable(t *testing.T) {
	r := tableRules(t)
	for _, tc := range []struct {
		line    string
		verdict Verdict
		command string // the deciding simple command
		why     string // Decision.Why()
	}{
		// The case table of the notes, row by row.
		{"ls -la && rm -rf build", Deny, "rm -rf build", "rule Bash(rm -rf:*)"},
		{"ls $(rm -rf x)", Deny, "rm -rf x", "rule Bash(rm -rf:*)"},
		{"echo \"`rm -rf x`\"", Deny, "rm -rf x", "rule Bash(rm -rf:*)"},
		{"echo ${X:-$(rm -rf x)}", Deny, "rm -rf x", "rule Bash(rm -rf:*)"},
		{"cat <(rm -rf x)", Deny, "rm -rf x", "rule Bash(rm -rf:*)"},
		{"(cd sub && rm -rf x)", Deny, "rm -rf x", "rule Bash(rm -rf:*)"},
		{`for f in $(ls); do rm -rf "$f"; done`, Deny, `rm -rf "$f"`, "rule Bash(rm -rf:*)"},
		{"f() { rm -rf x; }; f", Deny, "rm -rf x", "rule Bash(rm -rf:*)"},
		{`TZ="$HOME" rm -rf build`, Deny, "rm -rf build", "rule Bash(rm -rf:*)"},
		{"env X=1 timeout 5 nohup rm -rf x", Deny, "rm -rf x", "rule Bash(rm -rf:*)"},
		{`bash -c "rm -rf x"`, Deny, "rm -rf x", "rule Bash(rm -rf:*)"},
		{`sh -lc 'rm -rf x'`, Deny, "rm -rf x", "rule Bash(rm -rf:*)"},
		{`find . -exec rm -rf {} \;`, Deny, "rm -rf {}", "rule Bash(rm -rf:*)"},
		{"ls | xargs rm -rf", Deny, "rm -rf", "rule Bash(rm -rf:*)"},
		{"cat <<EOF\n$(rm -rf x)\nEOF", Deny, "rm -rf x", "rule Bash(rm -rf:*)"},
		{"cat <<'EOF'\n$(rm -rf x)\nEOF", Allow, "cat", ReasonUnmatched},
		{"git push origin main", Ask, "git push origin main", "rule Bash(git push:*)"},
		{"git status && git push", Ask, "git push", "rule Bash(git push:*)"},
		{`eval "$CMD"`, Ask, `eval "$CMD"`, ReasonDynamic},
		{"$CMD x", Ask, "$CMD x", ReasonDynamic},
		{`"$(which rm)" -rf x`, Ask, `"$(which rm)" -rf x`, ReasonDynamic},
		{"PATH=/tmp/evil:$PATH ls", Ask, "ls", "assignment to PATH"},
		{"echo 'unterminated", Ask, "", ReasonUnparsable},
		{"ls -la # rm -rf x", Allow, "ls -la", "rule Bash(ls:*)"},
		{"/bin/rm -rf x", Deny, "/bin/rm -rf x", "rule Bash(rm -rf:*)"},
		{`\rm -rf x`, Deny, "rm -rf x", "rule Bash(rm -rf:*)"},
		{`'r'm -rf x`, Deny, "rm -rf x", "rule Bash(rm -rf:*)"},

		// Prefix, exact and glob matching on the normalised text.
		{"git push", Ask, "git push", "rule Bash(git push:*)"},
		{"git pushx", Allow, "git pushx", ReasonUnmatched},
		{"git  status", Allow, "git status", "rule Bash(git status)"},
		{"git status -s", Allow, "git status -s", ReasonUnmatched},
		{`git "push" origin`, Ask, "git push origin", "rule Bash(git push:*)"},
		{`rm "-rf" x`, Deny, "rm -rf x", "rule Bash(rm -rf:*)"},
		{`rm -r\f x`, Deny, "rm -rf x", "rule Bash(rm -rf:*)"},
		{"rm -fr x", Allow, "rm -fr x", ReasonUnmatched}, // the honest limit of prefix rules

		// More places commands hide.
		{"if rm -rf x; then ls; fi", Deny, "rm -rf x", "rule Bash(rm -rf:*)"},
		{"while rm -rf x; do :; done", Deny, "rm -rf x", "rule Bash(rm -rf:*)"},
		{"{ ls; rm -rf x; }", Deny, "rm -rf x", "rule Bash(rm -rf:*)"},
		{"ls |& rm -rf x &", Deny, "rm -rf x", "rule Bash(rm -rf:*)"},
		{"echo $((1 + $(rm -rf x)))", Deny, "rm -rf x", "rule Bash(rm -rf:*)"},
		{"[[ $(rm -rf x) ]]", Deny, "rm -rf x", "rule Bash(rm -rf:*)"},
		{"ls > >(rm -rf x)", Deny, "rm -rf x", "rule Bash(rm -rf:*)"},
		{"X=$(rm -rf x)", Deny, "rm -rf x", "rule Bash(rm -rf:*)"},
		{"time rm -rf x", Deny, "rm -rf x", "rule Bash(rm -rf:*)"},
		{"coproc rm -rf x", Deny, "rm -rf x", "rule Bash(rm -rf:*)"},
		{"trap 'rm -rf x' EXIT", Deny, "rm -rf x", "rule Bash(rm -rf:*)"},
		{"trap \"$X\" EXIT", Ask, "trap \"$X\" EXIT", ReasonDynamic},

		// Wrappers, with their options.
		{"sudo -u root rm -rf x", Deny, "rm -rf x", "rule Bash(rm -rf:*)"},
		{"sudo -nu root -- rm -rf x", Deny, "rm -rf x", "rule Bash(rm -rf:*)"},
		{"doas -u root rm -rf x", Deny, "rm -rf x", "rule Bash(rm -rf:*)"},
		{"command rm -rf x", Deny, "rm -rf x", "rule Bash(rm -rf:*)"},
		{"builtin echo hi", Allow, "echo hi", "rule Bash(echo:*)"},
		{"exec -a foo rm -rf x", Deny, "rm -rf x", "rule Bash(rm -rf:*)"},
		{"nice -n 10 rm -rf x", Deny, "rm -rf x", "rule Bash(rm -rf:*)"},
		{"timeout -s KILL 5 rm -rf x", Deny, "rm -rf x", "rule Bash(rm -rf:*)"},
		{"/usr/bin/time -o out rm -rf x", Deny, "rm -rf x", "rule Bash(rm -rf:*)"},
		{"stdbuf -oL rm -rf x", Deny, "rm -rf x", "rule Bash(rm -rf:*)"},
		{"ls | xargs -I {} -n1 rm -rf {}", Deny, "rm -rf {}", "rule Bash(rm -rf:*)"},
		{"find . -name '*.o' -execdir rm -rf {} +", Deny, "rm -rf {}", "rule Bash(rm -rf:*)"},
		{"nohup ls", Allow, "ls", "rule Bash(ls:*)"},
		{"env -S 'rm -rf x'", Ask, "env -S rm -rf x", ReasonDynamic},
		{"env -u SECRETS rm -rf x", Deny, "rm -rf x", "rule Bash(rm -rf:*)"},
		{"sudo -u admin", Allow, "sudo -u admin", ReasonWrapper},
		{"sudo -s", Ask, "sudo -s", ReasonDynamic},
		{"env PATH=/tmp ls", Ask, "env PATH=/tmp ls", "assignment to PATH"},
		{"sudo LD_PRELOAD=/x.so ls", Ask, "sudo LD_PRELOAD=/x.so ls", "assignment to LD_PRELOAD"},
		{"export BASH_ENV=/tmp/x", Ask, "BASH_ENV=", "assignment to BASH_ENV"},
		{`export "PATH=/tmp"`, Ask, "PATH=", "assignment to PATH"},
		{`declare "LD_PRELOAD=/x.so"; ls`, Ask, "LD_PRELOAD=", "assignment to LD_PRELOAD"},
		{"PROMPT_COMMAND='rm -rf x'", Ask, "PROMPT_COMMAND=", "assignment to PROMPT_COMMAND"},

		// Shells: scripts parsed again; non-literal or stdin scripts ask.
		{`bash -xec "ls; git push"`, Ask, "git push", "rule Bash(git push:*)"},
		{`zsh -c 'bash -c "rm -rf x"'`, Deny, "rm -rf x", "rule Bash(rm -rf:*)"},
		{`bash -c "$SCRIPT"`, Ask, `bash -c "$SCRIPT"`, ReasonDynamic},
		{"bash -c 'echo \"unterminated'", Ask, "bash -c echo \"unterminated", ReasonUnparsable},
		{"curl x | sh", Ask, "sh", ReasonDynamic},
		{"bash <<'EOF'\nrm -rf x\nEOF", Ask, "bash", ReasonDynamic},
		{"bash -s < script", Ask, "bash -s", ReasonDynamic},
		{"bash - <<< 'rm -rf x'", Ask, "bash -", ReasonDynamic},
		{"bash /dev/stdin <<< 'rm -rf x'", Ask, "bash /dev/stdin", ReasonDynamic},
		{". /dev/stdin <<< 'rm -rf x'", Ask, ". /dev/stdin", ReasonDynamic},
		{"bash script.sh", Allow, "bash script.sh", ReasonUnmatched},
		{"source ./env.sh", Allow, "source ./env.sh", ReasonUnmatched},
		{`. "$F"`, Ask, `. "$F"`, ReasonDynamic},

		// Names that are not what they seem.
		{"$'\\x72m' -rf x", Ask, "$'\\x72m' -rf x", ReasonDynamic},
		{"/bin/r? -rf x", Ask, "/bin/r? -rf x", ReasonDynamic},
		{"{rm,-rf,x}", Ask, "{rm,-rf,x}", ReasonDynamic},
		{"[ -f x ] && ls", Allow, "[ -f x ]", ReasonUnmatched},

		// Nothing to run.
		{"", Allow, "", ReasonNoCommands},
		{"# rm -rf x", Allow, "", ReasonNoCommands},
		{"X=1", Allow, "", ReasonNoCommands},
	} {
		d := r.Check(tc.line)
		if d.Verdict != tc.verdict || d.Command != tc.command || d.Why() != tc.why {
			t.Errorf("Check(%q) = %v, %q, %q; want %v, %q, %q\ncommands: %+v",
				tc.line, d.Verdict, d.Command, d.Why(), tc.verdict, tc.command, tc.why, d.Commands)
		}
	}
}

// The list of simple commands found, in order, is what `conch check`
// prints.
func TestCheckCommands(t *testing.T) {
	r := tableRules(t)
	for _, tc := range []struct {
		line string
		want []string
	}{
		{"ls -la && rm -rf build", []string{"ls -la", "rm -rf build"}},
		{"env X=1 timeout 5 nohup rm -rf x", []string{"env X=1 timeout 5 nohup rm -rf x", "timeout 5 nohup rm -rf x", "nohup rm -rf x", "rm -rf x"}},
		{`for f in $(ls); do rm -rf "$f"; done`, []string{"ls", `rm -rf "$f"`}},
		{`bash -c "ls | wc -l"`, []string{"bash -c ls | wc -l", "ls", "wc -l"}},
		{`find . -exec rm {} \; -exec ls {} +`, []string{"find . -exec rm {} ; -exec ls {} +", "rm {}", "ls {}"}},
	} {
		d := r.Check(tc.line)
		var got []string
		for _, c := range d.Commands {
			got = append(got, c.Text)
		}
		if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
			t.Errorf("Check(%q).Commands = %q; want %q", tc.line, got, tc.want)
		}
	}
}

func TestUnmatchedAsk(t *testing.T) {
	r, err := Parse(nil, nil, []string{"Bash(ls:*)", "Bash(git status)"}, "ask")
	if err != nil {
		t.Fatal(err)
	}
	for line, want := range map[string]Verdict{
		"ls -la":                Allow,
		"nohup ls":              Allow, // a wrapper is not itself unmatched
		"ls && make":            Ask,
		"git status; git fetch": Ask,
		"":                      Allow,
	} {
		if d := r.Check(line); d.Verdict != want {
			t.Errorf("Check(%q) = %v (%s); want %v", line, d.Verdict, d.Why(), want)
		}
	}
	// A rule on the wrapper itself applies too.
	r, err = Parse([]string{"Bash(sudo:*)"}, nil, []string{"Bash(ls:*)"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if d := r.Check("sudo ls"); d.Verdict != Deny || d.Command != "sudo ls" {
		t.Errorf("Check(sudo ls) = %v %q; want deny by the sudo rule", d.Verdict, d.Command)
	}
}

func TestParseRule(t *testing.T) {
	for _, tc := range []struct {
		rule, match, noMatch string
	}{
		{"Bash(git push:*)", "git push origin main", "git pushx"},
		{"Bash(git push:*)", "git push", "git"},
		{"Bash(git status)", "git status", "git status -s"},
		{"Bash(/usr/bin/npm publish:*)", "npm publish --tag x", "npm install"},
		{"Bash('git'  \"push\":*)", "git push", "git pull"},
		{"Bash(git * main)", "git push origin main", "git push origin mainx"},
		{"Bash(*)", "anything at all", ""},
		{"Bash(rm -rf /*)", "rm -rf /home", "rm -rf ./x"},
		{`Bash(git commit -m "$MSG")`, `git commit -m "$MSG"`, "git commit -m msg"},
	} {
		r, err := ParseRule(tc.rule)
		if err != nil {
			t.Errorf("ParseRule(%q): %v", tc.rule, err)
			continue
		}
		if !r.Match(tc.match) {
			t.Errorf("%s does not match %q", tc.rule, tc.match)
		}
		if tc.noMatch != "" && r.Match(tc.noMatch) {
			t.Errorf("%s matches %q", tc.rule, tc.noMatch)
		}
		if r.String() != tc.rule {
			t.Errorf("String() = %q; want %q", r.String(), tc.rule)
		}
	}
	for rule, want := range map[string]string{
		"git push":          `rule "git push": expected Bash(<command>), Bash(<prefix>:*) or Bash(<glob with *>)`,
		"Bash(git push":     `rule "Bash(git push": expected Bash(<command>), Bash(<prefix>:*) or Bash(<glob with *>)`,
		"Bash()":            `rule "Bash()": empty command`,
		"Bash(:*)":          `rule "Bash(:*)": empty command`,
		"Bash(ls; rm)":      `rule "Bash(ls; rm)": a rule names one simple command`,
		"Bash(ls | wc:*)":   `rule "Bash(ls | wc:*)": a rule names one simple command`,
		"Bash(X=1 ls)":      `rule "Bash(X=1 ls)": a rule names one simple command`,
		"Bash(echo 'x)":     `rule "Bash(echo 'x)": cannot parse: 1:6: reached EOF without closing quote ` + "`'`",
		"Read(/etc/passwd)": `rule "Read(/etc/passwd)": expected Bash(<command>), Bash(<prefix>:*) or Bash(<glob with *>)`,
	} {
		_, err := ParseRule(rule)
		if err == nil || err.Error() != want {
			t.Errorf("ParseRule(%q) = %v; want %s", rule, err, want)
		}
	}
	if _, err := Parse(nil, []string{"Bash(ok)", "bad"}, nil, ""); err == nil || !strings.HasPrefix(err.Error(), `ask: rule "bad"`) {
		t.Errorf("Parse with a bad ask rule: %v", err)
	}
	if _, err := Parse(nil, nil, nil, "deny"); err == nil || err.Error() != `unmatched: expected "allow" or "ask", got "deny"` {
		t.Errorf("Parse with unmatched deny: %v", err)
	}
}

func TestGlobMatch(t *testing.T) {
	for _, tc := range []struct {
		p, s string
		want bool
	}{
		{"*", "", true}, {"a*b", "ab", true}, {"a*b", "axxb", true}, {"a*b", "axxbx", false},
		{"*a*a*a*b", strings.Repeat("a", 200), false}, {"a**", "a", true}, {"", "", true}, {"", "x", false},
	} {
		if got := globMatch(tc.p, tc.s); got != tc.want {
			t.Errorf("globMatch(%q, %q) = %v", tc.p, tc.s, got)
		}
	}
}

// bash runs the first lines of a script before a syntax error further
// down, so they are decided, and a deny there stands.
func TestCheckUnparsableTail(t *testing.T) {
	r := tableRules(t)
	for line, want := range map[string]Verdict{
		"rm -rf x\n(":        Deny,
		"rm -rf x &!\\\n\n#": Deny,
		"ls\n(":              Ask,
		"git push\n(":        Ask,
	} {
		if d := r.Check(line); d.Verdict != want {
			t.Errorf("Check(%q) = %v (%s); want %v", line, d.Verdict, d.Why(), want)
		}
	}
}

// One Rules serves every session at once (run with -race).
func TestCheckConcurrent(t *testing.T) {
	r := tableRules(t)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				if d := r.Check(`bash -c "ls && rm -rf x"`); d.Verdict != Deny {
					t.Errorf("verdict %v", d.Verdict)
				}
			}
		})
	}
	wg.Wait()
}

func TestSessionRuleAndAllowing(t *testing.T) {
	r, err := Parse([]string{"Bash(rm -rf:*)"}, []string{"Bash(git push:*)", "Bash(npm * --force)"}, []string{"Bash(ls:*)"}, "ask")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		line    string
		session string // "" when none may be remembered
		after   Verdict
	}{
		{"git push origin main", "Bash(git push:*)", Allow},
		{"npm ci --force", "Bash(npm * --force)", Allow},
		{"npm install lodash", "Bash(npm install:*)", Allow},
		{"make", "Bash(make:*)", Allow},
		{"python3 x.py", "Bash(python3:*)", Allow},
		{"git push && make", "Bash(git push:*)", Ask}, // make still asks
		{"$CMD", "", Ask},
		{"PATH=/x ls", "", Ask},
		{"echo 'x", "", Ask},
	} {
		d := r.Check(tc.line)
		sr, ok := d.SessionRule()
		if got := map[bool]string{true: sr.String()}[ok]; got != tc.session {
			t.Errorf("Check(%q).SessionRule() = %q; want %q", tc.line, got, tc.session)
			continue
		}
		if !ok {
			if a := d.Allowing([]Rule{{raw: "Bash(*)", kind: glob, pattern: "*"}}); a.Verdict != Ask {
				t.Errorf("Check(%q).Allowing(everything) = %v; a dynamic command, a dangerous assignment or an unparsable line must still ask", tc.line, a.Verdict)
			}
			continue
		}
		if a := d.Allowing([]Rule{sr}); a.Verdict != tc.after {
			t.Errorf("Check(%q).Allowing(%s) = %v (%s %q); want %v", tc.line, sr, a.Verdict, a.Why(), a.Command, tc.after)
		}
	}
	// A session rule never lifts a deny.
	sr, _ := ParseRule("Bash(rm:*)")
	if d := r.Check("rm -rf x").Allowing([]Rule{sr}); d.Verdict != Deny {
		t.Errorf("a session rule lifted a deny: %v", d.Verdict)
	}
}
