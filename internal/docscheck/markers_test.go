package docscheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// wild stands, in a marker's pattern, for a value: a formatting verb
// (%s, %d, …) or a value joined in with + in the code; <name> or an
// ellipsis in the docs.
const wild = '\x00'

// markerPatterns returns the pattern of each marker the production code
// can write (a string that starts with "["): its literal parts, with wild
// for each value.
func markerPatterns(t *testing.T) []string {
	t.Helper()
	var out []string
	seen := map[string]bool{}
	add := func(parts []string) {
		if len(parts) == 0 || !strings.HasPrefix(parts[0], "[") {
			return
		}
		for i, p := range parts {
			parts[i] = fmtVerb.ReplaceAllString(p, string(wild))
		}
		s := strings.TrimRight(strings.Join(parts, string(wild)), "\n")
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	fset := token.NewFileSet()
	var files []*ast.File
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err == nil {
			files = append(files, f)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// String constants, by name (of any package: a heuristic that is
	// enough here), so "[exit code: " + … through a constant counts.
	consts := map[string]string{}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			if vs, ok := n.(*ast.ValueSpec); ok {
				for i, name := range vs.Names {
					if i < len(vs.Values) {
						if s, ok := literal(vs.Values[i], nil); ok {
							consts[name.Name] = s
						}
					}
				}
			}
			return true
		})
	}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.BinaryExpr:
				if n.Op == token.ADD {
					if parts, ok := concat(n, consts); ok {
						add(parts)
					}
					return false // its parts alone are not markers ("[connection to host " + …)
				}
			case *ast.BasicLit:
				if s, ok := literal(n, nil); ok {
					add([]string{s})
				}
			}
			return true
		})
	}
	return out
}

// overlap reports whether some text fits both a (a marker the docs show)
// and b (a pattern of the code): literal bytes match themselves; a wild
// of the docs stands for any run of b, wilds included; a wild of the code
// for one or more bytes of a.
func overlap(a, b string) bool {
	memo := map[[2]int]bool{}
	var m func(i, j int) bool
	m = func(i, j int) bool {
		key := [2]int{i, j}
		if v, ok := memo[key]; ok {
			return v
		}
		var v bool
		switch {
		case i == len(a):
			v = j == len(b)
		case a[i] == wild:
			v = m(i+1, j) || j < len(b) && m(i, j+1)
		case j == len(b):
			v = false
		case b[j] == wild:
			v = m(i+1, j+1) || m(i+1, j)
		default:
			v = a[i] == b[j] && m(i+1, j+1)
		}
		memo[key] = v
		return v
	}
	return m(0, 0)
}

// fmtVerb matches a formatting verb of package fmt.
var fmtVerb = regexp.MustCompile(`%[-+# 0]*[0-9]*(?:\.[0-9]+)?[sdvqxXfgt]`)

// literal is the value of a string literal, or of a constant of consts
// named by e.
func literal(e ast.Expr, consts map[string]string) (string, bool) {
	if id, ok := e.(*ast.Ident); ok {
		s, ok := consts[id.Name]
		return s, ok
	}
	l, ok := e.(*ast.BasicLit)
	if !ok || l.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(l.Value)
	return s, err == nil
}

// concat flattens a chain of + into its literal parts, a value that is
// not a literal splitting them (it stands for a wildcard). ok is false
// when the chain has no literal.
func concat(e *ast.BinaryExpr, consts map[string]string) (parts []string, ok bool) {
	var walk func(ast.Expr)
	pending, gap := "", false
	walk = func(x ast.Expr) {
		if b, isBin := x.(*ast.BinaryExpr); isBin && b.Op == token.ADD {
			walk(b.X)
			walk(b.Y)
			return
		}
		if s, isLit := literal(x, consts); isLit {
			if gap {
				parts, pending, gap = append(parts, pending), "", false
			}
			pending += s
			ok = true
			return
		}
		gap = true
	}
	walk(e)
	parts = append(parts, pending)
	if gap {
		parts = append(parts, "")
	}
	return parts, ok
}

// docMarker is a marker shown in the docs: a code span that starts with
// "[" and ends with "]" ("[[" starts a table of a TOML file, not a
// marker).
var docMarker = regexp.MustCompile("`(\\[[^`\\[][^`\\n]*\\])`")

// placeholder is what a doc writes for a value: <name> or an ellipsis.
var placeholder = regexp.MustCompile(`<[^<>]+>|…`)

// TestDocMarkersExist: every marker the docs show, values and all, is one
// the code still writes: it matches the pattern of a string of the
// production code that starts as it does. A marker reworded in the code
// and not in the docs fails here. Spans whose first word no code string
// starts with (a TOML table, a shell test) are not markers.
func TestDocMarkersExist(t *testing.T) {
	patterns := markerPatterns(t)
	if len(patterns) < 30 {
		t.Fatalf("found %d marker patterns in the code; the walk is broken", len(patterns))
	}
	checked := 0
	for _, page := range pages(t) {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, page)
		for i, line := range strings.Split(string(b), "\n") {
			for _, m := range docMarker.FindAllStringSubmatch(line, -1) {
				shown := placeholder.ReplaceAllString(m[1], string(wild))
				first := firstWord(shown)
				var kin, match bool
				for _, p := range patterns {
					if strings.HasPrefix(p, first) {
						kin = true
						if overlap(shown, p) {
							match = true
							break
						}
					}
				}
				if !kin {
					continue
				}
				checked++
				if !match {
					t.Errorf("%s:%d: the docs show %s, which no string of the code writes", rel, i+1, m[1])
				}
			}
		}
	}
	t.Logf("%d markers of the docs checked against %d of the code", checked, len(patterns))
	if checked < 40 {
		t.Fatalf("checked %d markers of the docs; the search is broken", checked)
	}
}

// firstWord is a marker's opening: its bracket, its first word and the
// byte after it ("[sandbox:", "[sandbox]", a TOML table, is another);
// one no string starts with where no word follows the bracket (a shell
// test such as [ -v ] is no marker).
func firstWord(s string) string {
	i := strings.IndexFunc(s[1:], func(r rune) bool { return !unicode.IsLetter(r) })
	if i < 1 {
		return "\xff"
	}
	return s[:i+2]
}

// absentTag is how a page marks a claim that something is not built yet:
// <!-- absent: X --> beside the claim, X a string the production code
// would hold once it is built (a configuration key, a package's path).
var absentTag = regexp.MustCompile(`<!-- absent: (\S+) -->`)

// TestDocAbsencesHold: a page that says a thing is not built yet (and
// tags the claim) fails here the day the code has it, until the page is
// made true.
func TestDocAbsencesHold(t *testing.T) {
	var code strings.Builder
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		code.Write(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	tags := 0
	for _, page := range pages(t) {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, page)
		for i, line := range strings.Split(string(b), "\n") {
			for _, m := range absentTag.FindAllStringSubmatchIndex(line, -1) {
				if m[0] > 0 && line[m[0]-1] == '`' {
					continue // shown, not used: the convention's own example
				}
				tags++
				m := []string{line[m[0]:m[1]], line[m[2]:m[3]]}
				if strings.Contains(code.String(), m[1]) {
					t.Errorf("%s:%d: the page says %q is not built, and the code has it: make the page true", rel, i+1, m[1])
				}
			}
		}
	}
	t.Logf("%d claims of absence checked", tags)
}
