package rules

import (
	"regexp"
	"strings"
	"testing"

	"mvdan.cc/sh/v3/syntax"
)

// FuzzCheck holds two promises: Check never panics, and a decision never
// gets weaker when whitespace, comments or redundant quoting are added to
// a line that parses (an unparsable line asks, whatever is added).
func FuzzCheck(f *testing.F) {
	for _, s := range []string{
		"ls -la && rm -rf build", "ls $(rm -rf x)", "echo \"`rm -rf x`\"", "echo ${X:-$(rm -rf x)}",
		"cat <(rm -rf x)", "(cd sub && rm -rf x)", `for f in $(ls); do rm -rf "$f"; done`,
		"f() { rm -rf x; }; f", `TZ="$HOME" rm -rf build`, "env X=1 timeout 5 nohup rm -rf x",
		`bash -c "rm -rf x"`, `sh -lc 'rm -rf x'`, `find . -exec rm -rf {} \;`, "ls | xargs rm -rf",
		"cat <<EOF\n$(rm -rf x)\nEOF", "cat <<'EOF'\n$(rm -rf x)\nEOF", "git push origin main",
		"git status && git push", `eval "$CMD"`, "$CMD x", `"$(which rm)" -rf x`, "PATH=/tmp/evil:$PATH ls",
		"echo 'unterminated", "ls -la # rm -rf x", "/bin/rm -rf x", `\rm -rf x`, `'r'm -rf x`,
		"sudo -u root env X=1 rm -rf x", "trap 'git push' EXIT", "ls \\\n-la",
		// the bypasses of docs/rules.md#what-asks-whatever-the-rules-say
		"./ls -rf x", "x='a[$(rm -rf x)]'; echo $((x))", "let y=x; declare -i z; [[ -v a[x] ]]", "echo ${!x} ${x@P} ${a[x]:y}",
		"printf -v PATH x; read -a GIT_SSH < f; declare -n r=PATH", "hash -p /bin/rm ls; alias ls=rm; mapfile -C cb a",
		"GIT_CONFIG_COUNT=1 git status", "xargs -I% bash -c %; find -exec sh -c {} +",
	} {
		f.Add(s)
	}
	r := tableRules(f)
	f.Fuzz(func(t *testing.T, line string) {
		d := r.Check(line)
		if _, err := parse(line); err != nil {
			return
		}
		for _, v := range variants(t, line) {
			base := d
			if v.base != line {
				base = r.Check(v.base)
			}
			if got := r.Check(v.line); got.Verdict < base.Verdict {
				t.Fatalf("%s made the decision weaker:\n%q: %v (%s)\n%q: %v (%s)",
					v.name, v.base, base.Verdict, base.Why(), v.line, got.Verdict, got.Why())
			}
		}
	})
}

func parse(line string) (*syntax.File, error) {
	return syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(line), "")
}

// safeWord is a word that means the same in single quotes.
var safeWord = regexp.MustCompile(`^[A-Za-z0-9_./:,+-]+$`)

type variant struct {
	name string
	base string // the line the variant is compared with
	line string
}

// variants are lines with whitespace, a comment or redundant quoting
// added, each meaning what its base means to bash. The printer's own
// output is the base of the reprinted variants: it does not always keep
// the meaning of odd input (`"$`+"`…`"+`"` comes out as `"$$(…)"`), and that is
// not the checker's to answer for.
func variants(t *testing.T, line string) []variant {
	out := []variant{{"leading whitespace", line, " \t " + line}}
	// A backslash at the very end is a literal one, which a following
	// newline would turn into a line continuation.
	if !strings.HasSuffix(line, `\`) {
		out = append(out, variant{"a comment line", line, line + "\n# rm -rf / ; ls\n"})
	}
	// The printer turns some control characters into spaces (a vertical
	// tab inside backticks), which bash does not: only lines without them
	// are reprinted.
	if strings.ContainsFunc(line, func(r rune) bool { return r < ' ' && r != '\t' && r != '\n' || r == 0x7f }) {
		return out
	}
	print := func(f *syntax.File, opts ...syntax.PrinterOption) string {
		var b strings.Builder
		if err := syntax.NewPrinter(opts...).Print(&b, f); err != nil {
			t.Fatalf("print %q: %v", line, err)
		}
		return b.String()
	}
	f, _ := parse(line)
	plain := print(f)
	out = append(out, variant{"reformatting", plain, print(f, syntax.Indent(4), syntax.BinaryNextLine(true), syntax.SwitchCaseIndent(true))})
	quoted := 0
	syntax.Walk(f, func(n syntax.Node) bool {
		call, ok := n.(*syntax.CallExpr)
		if !ok {
			return true
		}
		for _, w := range call.Args {
			if len(w.Parts) != 1 {
				continue
			}
			if l, ok := w.Parts[0].(*syntax.Lit); ok && safeWord.MatchString(l.Value) {
				w.Parts[0] = &syntax.SglQuoted{Value: l.Value}
				quoted++
			}
		}
		return true
	})
	if quoted > 0 {
		out = append(out, variant{"redundant quoting", plain, print(f)})
	}
	return out
}
