package docscheck

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// root is the repository's root, from this package's directory.
const root = "../.."

// anchors returns the heading anchors of a Markdown file, as GitHub makes
// them: lower case, spaces to hyphens, punctuation other than - and _
// dropped, a repeated anchor suffixed -1, -2, …
func anchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seen := map[string]int{}
	out := map[string]bool{}
	fenced := false
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(title) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteByte('-')
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			out[a+"-"+strconv.Itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// pages are the repository's Markdown pages: README.md and docs/*.md.
func pages(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil || len(docs) == 0 {
		t.Fatalf("no docs: %v", err)
	}
	return append([]string{filepath.Join(root, "README.md")}, docs...)
}

var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestMarkdownLinks: every relative link of README.md and docs/*.md names
// a file that exists and, when it has one, a heading of that file.
func TestMarkdownLinks(t *testing.T) {
	cache := map[string]map[string]bool{}
	heads := func(path string) map[string]bool {
		if cache[path] == nil {
			cache[path] = anchors(t, path)
		}
		return cache[path]
	}
	for _, page := range pages(t) {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		fenced := false
		for i, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "```") {
				fenced = !fenced
				continue
			}
			if fenced {
				continue
			}
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				file, anchor, _ := strings.Cut(target, "#")
				path := page
				if file != "" {
					path = filepath.Join(filepath.Dir(page), file)
				}
				rel, _ := filepath.Rel(root, page)
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s:%d: link to %s: %v", rel, i+1, target, err)
					continue
				}
				if anchor != "" && strings.HasSuffix(path, ".md") && !heads(path)[anchor] {
					t.Errorf("%s:%d: link to %s: no such heading", rel, i+1, target)
				}
			}
		}
	}
}

var goCite = regexp.MustCompile(`docs/([a-z0-9_-]+\.md)(#[a-z0-9_.-]*[a-z0-9_-])?`)

// TestGoCitesDocs: every docs/<page>.md#<heading> a Go file of the
// repository names exists.
func TestGoCitesDocs(t *testing.T) {
	cache := map[string]map[string]bool{}
	n := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			for _, m := range goCite.FindAllStringSubmatch(line, -1) {
				n++
				page := filepath.Join(root, "docs", m[1])
				rel, _ := filepath.Rel(root, path)
				if _, err := os.Stat(page); err != nil {
					t.Errorf("%s:%d: cites docs/%s: no such page", rel, i+1, m[1])
					continue
				}
				if m[2] == "" {
					continue
				}
				if cache[page] == nil {
					cache[page] = anchors(t, page)
				}
				if !cache[page][m[2][1:]] {
					t.Errorf("%s:%d: cites docs/%s%s: no such heading", rel, i+1, m[1], m[2])
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 50 {
		t.Fatalf("found %d citations; the walk is broken", n)
	}
}
