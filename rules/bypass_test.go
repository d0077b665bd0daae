package rules

import (
	"testing"
)

// bypassRules allow the commands a user would call harmless, ask for
// git push, deny rm, and ask for anything else: the configuration under
// which each bypass of docs/rules.md#what-asks-whatever-the-rules-say
// said allow (and deleted a file) before it was closed.
func bypassRules(t testing.TB) *Rules {
	t.Helper()
	r, err := Parse(
		[]string{"Bash(rm:*)"},
		[]string{"Bash(git push:*)"},
		[]string{"Bash(ls:*)", "Bash(cat:*)", "Bash(cp:*)", "Bash(echo:*)", "Bash(printf:*)", "Bash(test:*)", "Bash([:*)",
			"Bash(true:*)", "Bash(read:*)", "Bash(mapfile:*)", "Bash(readarray:*)", "Bash(hash:*)", "Bash(alias:*)",
			"Bash(shopt:*)", "Bash(set:*)", "Bash(compgen:*)", "Bash(enable:*)", "Bash(history:*)", "Bash(fc:*)",
			"Bash(getopts:*)", "Bash(wait:*)", "Bash(git status)", "Bash(git diff:*)", "Bash(git log:*)",
			"Bash(./gradlew:*)", "Bash(/usr/bin/make:*)", "Bash(bash:*)", "Bash(find:*)", "Bash(source:*)"},
		"ask")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestCheckBypasses: each bypass below said allow (and ran rm) before
// it was closed; each is decided as docs/rules.md says now, and the near
// misses beside them still run.
func TestCheckBypasses(t *testing.T) {
	r := bypassRules(t)
	const payload = `'a[$(rm -rf x)]'`
	for _, tc := range []struct {
		line    string
		verdict Verdict
		command string
		why     string
	}{
		// A command named with a "/": deny and ask rules see its
		// basename; an allow rule must name the path.
		{"cp /bin/rm ./ls; ./ls -rf x", Ask, "./ls -rf x", ReasonUnmatched},
		{"/tmp/x/cat -rf x", Ask, "/tmp/x/cat -rf x", ReasonUnmatched},
		{"../bin/ls", Ask, "../bin/ls", ReasonUnmatched},
		{"/bin/rm -rf x", Deny, "/bin/rm -rf x", "rule Bash(rm:*)"},
		{"./rm -rf x", Deny, "./rm -rf x", "rule Bash(rm:*)"},
		{"'ls /rm' -rf x", Deny, "ls /rm -rf x", "rule Bash(rm:*)"},
		{"'ls /x' -rf y", Ask, "ls /x -rf y", ReasonUnmatched},
		{"/usr/bin/git push", Ask, "/usr/bin/git push", "rule Bash(git push:*)"},
		{"ls -la", Allow, "ls -la", "rule Bash(ls:*)"},
		{"./gradlew build", Allow, "./gradlew build", "rule Bash(./gradlew:*)"},
		{"/usr/bin/make all", Allow, "/usr/bin/make all", "rule Bash(/usr/bin/make:*)"},
		{"make all", Allow, "make all", "rule Bash(/usr/bin/make:*)"},
		{"/usr/local/bin/make all", Ask, "/usr/local/bin/make all", ReasonUnmatched},
		{"gradlew build", Allow, "gradlew build", "rule Bash(./gradlew:*)"},
		{"env ./ls -rf x", Ask, "./ls -rf x", ReasonUnmatched},

		// Variables that make an allowed program run a command.
		{"GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.fsmonitor GIT_CONFIG_VALUE_0='rm -rf x' git status", Ask, "git status", "assignment to GIT_CONFIG_COUNT"},
		{`GIT_CONFIG_PARAMETERS="'core.fsmonitor'='rm -rf x'" git status`, Ask, "git status", "assignment to GIT_CONFIG_PARAMETERS"},
		{"GIT_EXTERNAL_DIFF='rm -rf x;:' git diff", Ask, "git diff", "assignment to GIT_EXTERNAL_DIFF"},
		{"env GIT_SSH_COMMAND='rm -rf x' git status", Ask, "env GIT_SSH_COMMAND=rm -rf x git status", "assignment to GIT_SSH_COMMAND"},
		{"export GIT_PAGER='rm -rf x;cat'; git log", Ask, "GIT_PAGER=", "assignment to GIT_PAGER"},
		{"sudo NODE_OPTIONS='--require ./x.js' ls", Ask, "sudo NODE_OPTIONS=--require ./x.js ls", "assignment to NODE_OPTIONS"},
		{"env GIT_EXTERNAL_DIFF=x rm -rf y", Deny, "rm -rf y", "rule Bash(rm:*)"},
		{"GIT_AUTHOR_NAME=x GIT_TRACE=1 git status", Allow, "git status", "rule Bash(git status)"},
		{"PYTHONPATH=src ls", Allow, "ls", "rule Bash(ls:*)"},
		{"path=/tmp/evil ls", Allow, "ls", "rule Bash(ls:*)"},
		{"PS4='$(rm -rf x)'; set -x; ls", Ask, "PS4=", "assignment to PS4"},
		{"env BASH_ENV=./x bash -c ls", Ask, "env BASH_ENV=./x bash -c ls", "assignment to BASH_ENV"},

		// Arithmetic that evaluates a variable the line gave text.
		{"x=" + payload + "; echo $((x))", Ask, "echo $((x))", ReasonDynamic},
		{"x=" + payload + "; echo $(($x))", Ask, "echo $(($x))", ReasonDynamic},
		{"x=" + payload + "; let y=x", Ask, "let y=x", ReasonDynamic},
		{"x=" + payload + "; (( x ))", Ask, "((x))", ReasonDynamic},
		{"x=" + payload + "; echo $[x]", Ask, "echo $((x))", ReasonDynamic},
		{"x=" + payload + "; for ((i=x; i<1; i++)); do true; done", Ask, "for ((i = x; i < 1; i++)); do true; done", ReasonDynamic},
		{"declare -i y; y=" + payload, Ask, "declare -i y", ReasonDynamic},
		{"declare -i y=" + payload, Ask, "declare -i y='a[$(rm -rf x)]'", ReasonDynamic},
		{"test -v " + payload, Ask, "test -v a[$(rm -rf x)]", ReasonDynamic},
		{"[ -v " + payload + " ]", Ask, "[ -v a[$(rm -rf x)] ]", ReasonDynamic},
		{"[[ -v " + payload + " ]]", Ask, "[[ -v 'a[$(rm -rf x)]' ]]", ReasonDynamic},
		{"[[ -v a[x] ]]", Ask, "[[ -v a[x] ]]", ReasonDynamic},
		{"x=" + payload + "; [[ $x -eq 1 ]]", Ask, "[[ $x -eq 1 ]]", ReasonDynamic},
		{"x=" + payload + "; [[ x -gt 1 ]]", Ask, "[[ x -gt 1 ]]", ReasonDynamic},
		{"[[ " + payload + " -eq 1 ]]", Ask, "[[ 'a[$(rm -rf x)]' -eq 1 ]]", ReasonDynamic},
		{"x=" + payload + "; echo ${!x}", Ask, "echo ${!x}", ReasonDynamic},
		{"x=" + payload + "; a=(1); echo ${a[x]}", Ask, "echo ${a[x]}", ReasonDynamic},
		{"x=" + payload + "; a[x]=1", Ask, "a[x]=1", ReasonDynamic},
		{"x=" + payload + "; s=abc; echo ${s:x}", Ask, "echo ${s:x}", ReasonDynamic},
		{"f() { echo $((x)); }; x=" + payload + "; f", Ask, "echo $((x))", ReasonDynamic},
		{"x=$(cat n); echo $((x + 1))", Ask, "echo $((x + 1))", ReasonDynamic},
		{"read x < n; echo $((x))", Ask, "echo $((x))", ReasonDynamic},
		{"printf -v x %s " + payload + "; echo $((x))", Ask, "echo $((x))", ReasonDynamic},
		{"echo " + payload + "; echo $(($_))", Ask, "echo $(($_))", ReasonDynamic},
		{"set -- " + payload + "; echo $(($1))", Ask, "echo $(($1))", ReasonDynamic},
		{"[[ " + payload + " =~ (.*) ]]; echo $((BASH_REMATCH[1]))", Ask, "echo $((BASH_REMATCH[1]))", ReasonDynamic},
		{"declare -n r=x; x=" + payload + "; echo $((r))", Ask, "echo $((r))", ReasonDynamic},
		{"echo $(( $(cat n) + 1 ))", Ask, "echo $(($(cat n) + 1))", ReasonDynamic},
		{"x=1; x+='+a[$(rm -rf x)]'; echo $((x))", Ask, "echo $((x))", ReasonDynamic},
		{"x=" + payload + " bash -c 'echo $((x))'", Ask, "echo $((x))", ReasonDynamic},
		{"x=" + payload + "; rm $((x))", Deny, "rm $((x))", "rule Bash(rm:*)"},
		// … and arithmetic that does not.
		{"echo $((1 + 2))", Allow, "echo $((1 + 2))", "rule Bash(echo:*)"},
		{"n=5; echo $((n * 2)) $((0x1f)) $((16#ff))", Allow, "echo $((n * 2)) $((0x1f)) $((16#ff))", "rule Bash(echo:*)"},
		{"for ((i=0; i<3; i++)); do echo $i; done", Allow, "echo $i", "rule Bash(echo:*)"},
		{"for i in 1 2 3; do echo $((i * 2)); done", Allow, "echo $((i * 2))", "rule Bash(echo:*)"},
		{"echo $((COLUMNS / 2))", Allow, "echo $((COLUMNS / 2))", "rule Bash(echo:*)"},
		{"n=$((n + 1)); echo $((n))", Allow, "echo $((n))", "rule Bash(echo:*)"},
		{"x=abc; echo ${#x} $((${#x} + 1)) ${x:1}", Allow, "echo ${#x} $((${#x} + 1)) ${x:1}", "rule Bash(echo:*)"},
		{"a=(1 2 3); echo ${a[1]} ${a[@]} ${#a[@]}", Allow, "echo ${a[1]} ${a[@]} ${#a[@]}", "rule Bash(echo:*)"},
		{"x=" + payload + `; [ "$x" -eq 1 ]`, Allow, `[ "$x" -eq 1 ]`, "rule Bash([:*)"},
		{"x=" + payload + `; echo "$x"`, Allow, `echo "$x"`, "rule Bash(echo:*)"},
		{"[[ -v x ]] && [[ -v a[1] ]] && [[ $# -gt 0 ]]", Allow, "", ReasonNoCommands},

		// Text evaluated as code, names rebound.
		{`x='$(rm -rf x)'; echo "${x@P}"`, Ask, `echo "${x@P}"`, ReasonDynamic},
		{"printf 'a\\n' | mapfile -C 'rm -rf x' -c 1 arr", Ask, "mapfile -C rm -rf x -c 1 arr", ReasonDynamic},
		{"readarray -t -C 'rm -rf x' arr < f", Ask, "readarray -t -C rm -rf x arr", ReasonDynamic},
		{"mapfile -t lines < f", Allow, "mapfile -t lines", "rule Bash(mapfile:*)"},
		{"hash -p /bin/rm ls; ls -rf x", Ask, "hash -p /bin/rm ls", ReasonDynamic},
		{"hash -r", Allow, "hash -r", "rule Bash(hash:*)"},
		{"shopt -s expand_aliases; alias ls='rm -rf'\nls x", Ask, "alias ls=rm -rf", ReasonDynamic},
		{"alias", Allow, "alias", "rule Bash(alias:*)"},
		{"compgen -W '$(rm -rf x)' y", Ask, "compgen -W $(rm -rf x) y", ReasonDynamic},
		{"compgen -C 'rm -rf x' y", Ask, "compgen -C rm -rf x y", ReasonDynamic},
		{"compgen -A file", Allow, "compgen -A file", "rule Bash(compgen:*)"},
		{"enable -f ./x.so rm", Ask, "enable -f ./x.so rm", ReasonDynamic},
		{"history -r h; fc -s", Ask, "fc -s", ReasonDynamic},
		{"fc -l", Allow, "fc -l", "rule Bash(fc:*)"},
		{"trap 'rm -rf x' EXIT", Deny, "rm -rf x", "rule Bash(rm:*)"},
		{"command_not_found_handle() { rm -rf x; }; nosuch", Deny, "rm -rf x", "rule Bash(rm:*)"},
		{"bash --rcfile ./x -ic ls", Ask, "bash --rcfile ./x -ic ls", ReasonDynamic},
		{"echo 'rm -rf x' | xargs -I% bash -c %", Ask, "bash -c %", ReasonDynamic},
		{`echo "'rm -rf x'" | xargs bash -c`, Ask, "bash -c", ReasonDynamic},
		{"echo x | xargs timeout 5 bash -c", Ask, "bash -c", ReasonDynamic},
		{`find . -exec bash -c {} \;`, Ask, "bash -c {}", ReasonDynamic},
		{`find . -exec sh -c 'echo {}' \;`, Ask, "sh -c echo {}", ReasonDynamic},
		{"find . -exec {} \\;", Ask, "{}", ReasonDynamic},
		{"ls | xargs -I{} cat {}", Allow, "ls", "rule Bash(ls:*)"},
		{`find . -exec bash -c 'ls "$1"' _ {} \;`, Allow, `find . -exec bash -c ls "$1" _ {} ;`, "rule Bash(find:*)"},

		// Writing PATH or another dangerous name by other means.
		{"printf -v PATH %s /tmp/evil; ls", Ask, "printf -v PATH %s /tmp/evil", "assignment to PATH"},
		{"printf -vPATH %s /tmp/evil; ls", Ask, "printf -vPATH %s /tmp/evil", "assignment to PATH"},
		{"declare -n p=PATH; p=/tmp/evil; ls", Ask, "declare -n p=PATH", "assignment to PATH"},
		{"f() { local -n p=LD_PRELOAD; p=/x.so; }; f; ls", Ask, "local -n p=LD_PRELOAD", "assignment to LD_PRELOAD"},
		{"typeset -n p; p=PATH", Ask, "typeset -n p", ReasonDynamic},
		{"read PATH <<< /tmp/evil; ls", Ask, "read PATH", "assignment to PATH"},
		{"read -r -a GIT_CONFIG_PARAMETERS < f", Ask, "read -r -a GIT_CONFIG_PARAMETERS", "assignment to GIT_CONFIG_PARAMETERS"},
		{"mapfile PATH < f", Ask, "mapfile PATH", "assignment to PATH"},
		{"getopts a PATH", Ask, "getopts a PATH", "assignment to PATH"},
		{"wait -n -p PATH", Ask, "wait -n -p PATH", "assignment to PATH"},
		{"for PATH in /tmp/evil; do ls; done", Ask, "for PATH in /tmp/evil; do ls; done", "assignment to PATH"},
		{"true ${PATH:=/tmp/evil}", Ask, "true ${PATH:=/tmp/evil}", "assignment to PATH"},
		{"BASH_ALIASES[ls]='rm -rf'", Ask, "BASH_ALIASES=", "assignment to BASH_ALIASES"},
		{"BASH_CMDS[ls]=/bin/rm; ls -rf x", Ask, "BASH_CMDS=", "assignment to BASH_CMDS"},
		{"command export PATH=/tmp/evil; ls", Ask, "export PATH=/tmp/evil", "assignment to PATH"},
		{"builtin declare -n p=PATH", Ask, "declare -n p=PATH", "assignment to PATH"},
		{`declare "$v"`, Ask, `declare "$v"`, ReasonDynamic},
		{`read "$v" < f`, Ask, `read "$v"`, ReasonDynamic},
		{"read 'a[$(rm -rf x)]' < f", Ask, "read a[$(rm -rf x)]", ReasonDynamic},
		{"printf -v 'a[$(rm -rf x)]' x", Ask, "printf -v a[$(rm -rf x)] x", ReasonDynamic},
		{"declare 'a[$(rm -rf x)]=1'", Ask, "declare 'a[$(rm -rf x)]=1'", ReasonDynamic},
		{"read -r line < f; echo \"$line\"", Allow, "read -r line", "rule Bash(read:*)"},
		{"printf -v out %s x; echo $out", Allow, "printf -v out %s x", "rule Bash(printf:*)"},
		{"declare -a arr=(1 2); local -r x=1; export FOO=bar", Allow, "", ReasonNoCommands},
		{"export PATH", Ask, "PATH=", "assignment to PATH"},
	} {
		d := r.Check(tc.line)
		if d.Verdict != tc.verdict || d.Command != tc.command || d.Why() != tc.why {
			t.Errorf("Check(%q) = %v, %q, %q; want %v, %q, %q\ncommands: %+v",
				tc.line, d.Verdict, d.Command, d.Why(), tc.verdict, tc.command, tc.why, d.Commands)
		}
	}
}

// TestDangerousVars: every name docs/rules.md lists asks before an
// allowed command, alone, through env and through export; the names
// beside them do not.
func TestDangerousVars(t *testing.T) {
	r := bypassRules(t)
	for _, name := range []string{
		"GIT_CONFIG_COUNT", "GIT_CONFIG_KEY_0", "GIT_CONFIG_VALUE_12", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_GLOBAL",
		"GIT_CONFIG_SYSTEM", "GIT_EXTERNAL_DIFF", "GIT_SSH", "GIT_SSH_COMMAND", "GIT_PAGER", "GIT_EDITOR", "GIT_ASKPASS",
		"PAGER", "EDITOR", "VISUAL", "LD_AUDIT", "NODE_OPTIONS", "PYTHONSTARTUP", "PERL5OPT", "RUBYOPT",
		// section 12's
		"PATH", "BASH_ENV", "ENV", "LD_PRELOAD", "PROMPT_COMMAND",
		// the same class (see dangerousVars)
		"PS4", "BASH_ALIASES", "BASH_CMDS", "LD_LIBRARY_PATH", "GIT_SEQUENCE_EDITOR", "GIT_PROXY_COMMAND", "GIT_EXEC_PATH",
		"GIT_DIR", "GIT_COMMON_DIR", "GIT_TEMPLATE_DIR", "HOME", "XDG_CONFIG_HOME", "MANPAGER", "BROWSER", "SSH_ASKPASS",
		"SUDO_ASKPASS", "LESSOPEN", "LESSCLOSE", "TAR_OPTIONS", "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS",
	} {
		want := "assignment to " + name
		for _, line := range []string{name + "=x git status", "env " + name + "=x git status", "export " + name + "=x; git status",
			"declare -x " + name + "=x", "env -u X " + name + "=x git status"} {
			if d := r.Check(line); d.Verdict != Ask || d.Reason != want {
				t.Errorf("Check(%q) = %v (%s); want ask (%s)", line, d.Verdict, d.Why(), want)
			}
		}
	}
	for _, name := range []string{"GIT_AUTHOR_NAME", "GIT_TRACE", "GIT_TERMINAL_PROMPT", "GITHUB_SHA", "PYTHONPATH", "NODE_ENV", "LANG", "TZ", "path", "Home"} {
		if d := r.Check(name + "=x git status"); d.Verdict != Allow {
			t.Errorf("Check(%s=x git status) = %v (%s); want allow", name, d.Verdict, d.Why())
		}
	}
}

// A "for this session" answer to a command named with a "/" remembers
// that path; one remembered for a name never lifts a path.
func TestSessionRulePaths(t *testing.T) {
	r := bypassRules(t)
	for _, tc := range []struct {
		line, session string
	}{
		{"./ls -rf x", "Bash(./ls:*)"},
		{"/opt/x/tool build --fast", "Bash(/opt/x/tool build:*)"},
		{"'ls /x' -rf y", "Bash('ls /x':*)"},
		{"make2 install", "Bash(make2 install:*)"},
	} {
		d := r.Check(tc.line)
		sr, ok := d.SessionRule()
		if !ok || sr.String() != tc.session {
			t.Errorf("Check(%q).SessionRule() = %q, %v; want %q", tc.line, sr.String(), ok, tc.session)
			continue
		}
		if a := d.Allowing([]Rule{sr}); a.Verdict != Allow {
			t.Errorf("Check(%q).Allowing(%s) = %v (%s)", tc.line, sr, a.Verdict, a.Why())
		}
	}
	ls, _ := ParseRule("Bash(ls:*)")
	for _, line := range []string{"./ls -rf x", "'ls /x' -rf y", "/bin/ls"} {
		if a := r.Check(line).Allowing([]Rule{ls}); a.Verdict != Ask {
			t.Errorf("Check(%q).Allowing(Bash(ls:*)) = %v; a rule for ls lifted a path", line, a.Verdict)
		}
	}
	if sr, _ := r.Check("./ls -rf x").SessionRule(); sr.Pattern() != "./ls" {
		t.Errorf("Pattern() = %q, want ./ls", sr.Pattern())
	}
	for text, want := range map[string]bool{"ls -la": true, "./ls -la": false, "/bin/ls": false} {
		if got := ls.Match(text); got != want {
			t.Errorf("Bash(ls:*).Match(%q) = %v", text, got)
		}
	}
}
