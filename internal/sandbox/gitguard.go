package sandbox

import "strings"

// gitNames are the names whose presence in a path makes an operation
// the guard's concern: the first component of a protected path below a
// git directory, and the names that make a directory one.
var gitNames = []string{"config", "commondir", "gitdir", "hooks", "info", "objects", "modules", "worktrees", "HEAD", "refs", ".git"}

// sensitive reports whether path has a component the guard cares about.
func sensitive(path string) bool {
	for _, n := range gitNames {
		if i := strings.Index(path, n); i >= 0 {
			for ; i >= 0; i = nextIndex(path, n, i) {
				if (i == 0 || path[i-1] == '/') && (i+len(n) == len(path) || path[i+len(n)] == '/' || n == "config" && strings.HasPrefix(path[i+len(n):], ".worktree")) {
					return true
				}
			}
		}
	}
	return false
}

func nextIndex(s, sub string, from int) int {
	j := strings.Index(s[from+1:], sub)
	if j < 0 {
		return -1
	}
	return from + 1 + j
}
