//go:build linux

package docscheck

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/conch-dev/conch/internal/testutil"
)

// TestExportedNames: the exported names of every package of the module
// (its non-test files, with and without the kube tag) are those listed
// in testdata/exported.txt, one `package Name` or `package Type.Method`
// per line. A package's surface grows only by a change that shows the
// new lines in its diff (go test -run TestExportedNames -update
// rewrites the file): docs/architecture.md#exported-names.
func TestExportedNames(t *testing.T) {
	names := map[string]bool{}
	for _, tags := range []string{"", "kube"} {
		for pkg, files := range moduleFiles(t, tags) {
			for _, file := range files {
				for _, n := range exportedNames(t, file) {
					names[pkg+" "+n] = true
				}
			}
		}
	}
	lines := make([]string, 0, len(names))
	for n := range names {
		lines = append(lines, n)
	}
	slices.Sort(lines)
	testutil.Golden(t, "testdata/exported.txt", strings.Join(lines, "\n")+"\n")
}

// moduleFiles lists the module's packages (built with tags, for this
// GOOS) and the paths of their non-test Go files, the packages without
// the module's prefix.
func moduleFiles(t *testing.T, tags string) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-tags", tags, "-f", `{{.ImportPath}} {{.Dir}}{{range .GoFiles}} {{.}}{{end}}{{range .CgoFiles}} {{.}}{{end}}`, "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	all := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg := strings.TrimPrefix(f[0], module)
		for _, name := range f[2:] {
			all[pkg] = append(all[pkg], filepath.Join(f[1], name))
		}
	}
	return all
}

// exportedNames returns the exported top-level names file declares, and
// the exported methods of its types as Type.Method (a method of an
// unexported type counts too: an interface may carry it out).
func exportedNames(t *testing.T, file string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if !d.Name.IsExported() {
				continue
			}
			if d.Recv == nil {
				names = append(names, d.Name.Name)
				continue
			}
			names = append(names, receiverType(d.Recv.List[0].Type)+"."+d.Name.Name)
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					if s.Name.IsExported() {
						names = append(names, s.Name.Name)
					}
				case *ast.ValueSpec:
					for _, n := range s.Names {
						if n.IsExported() {
							names = append(names, n.Name)
						}
					}
				}
			}
		}
	}
	return names
}

// receiverType is the name of a method's receiver type, without its
// pointer or type parameters.
func receiverType(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return receiverType(e.X)
	case *ast.IndexExpr:
		return receiverType(e.X)
	case *ast.IndexListExpr:
		return receiverType(e.X)
	case *ast.Ident:
		return e.Name
	}
	panic(fmt.Sprintf("receiver of type %T", e))
}
