package docscheck

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// module is the import path of the repository's module.
const module = "github.com/conch-dev/conch/"

// fixtures is the row of docs/architecture.md's layer table whose
// packages may import any row and are imported by none.
const fixtures = "test fixtures"

// TestLayers: every package of the module is in exactly one row of
// docs/architecture.md's layer table, and imports only packages of its
// own row or of rows below it (the test fixtures aside): the table is
// the import graph's order, and a new package or an upward import fails
// here until the table or the code says otherwise.
func TestLayers(t *testing.T) {
	rank, names := layerTable(t)
	seen := map[string]bool{} // what the default build reported, not again with kube
	report := func(msg string) {
		if !seen[msg] {
			seen[msg] = true
			t.Error(msg)
		}
	}
	for _, tags := range []string{"", "kube"} {
		for pkg, imports := range moduleImports(t, tags) {
			r, ok := rank[pkg]
			if !ok {
				report(fmt.Sprintf("package %s is in no row of docs/architecture.md's layer table", pkg))
				continue
			}
			for _, imp := range imports {
				ir, ok := rank[imp]
				switch {
				case !ok:
					// Reported as a package of its own.
				case names[ir] == fixtures && names[r] != fixtures:
					report(fmt.Sprintf("%s (%s) imports the test fixture %s", pkg, names[r], imp))
				case names[r] != fixtures && ir < r:
					report(fmt.Sprintf("%s (%s) imports %s (%s), a layer above it", pkg, names[r], imp, names[ir]))
				}
			}
		}
	}
}

// layerTable reads docs/architecture.md's table: each package's row,
// from 0 at the top, and each row's name.
func layerTable(t *testing.T) (map[string]int, []string) {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	code := regexp.MustCompile("`([a-z][a-z0-9/]*)`")
	rank := map[string]int{}
	var names []string
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "| layer | packages |") {
			in = true
			continue
		}
		if !in || strings.HasPrefix(line, "|---") {
			continue
		}
		if !strings.HasPrefix(line, "|") {
			break
		}
		cells := strings.Split(line, "|")
		if len(cells) < 4 {
			t.Fatalf("a row of the layer table without its cells: %q", line)
		}
		names = append(names, strings.TrimSpace(cells[1]))
		for _, m := range code.FindAllStringSubmatch(cells[2], -1) {
			if prev, ok := rank[m[1]]; ok {
				t.Errorf("package %s is in two rows: %s and %s", m[1], names[prev], names[len(names)-1])
			}
			rank[m[1]] = len(names) - 1
		}
	}
	if len(names) == 0 {
		t.Fatal("docs/architecture.md has no layer table")
	}
	return rank, names
}

// moduleImports lists the module's packages (built with tags) and the
// module's packages each imports, both without the module's prefix.
func moduleImports(t *testing.T, tags string) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-tags", tags, "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	all := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg := strings.TrimPrefix(f[0], module)
		var mine []string
		for _, imp := range f[1:] {
			if p, ok := strings.CutPrefix(imp, module); ok {
				mine = append(mine, p)
			}
		}
		all[pkg] = mine
	}
	return all
}
