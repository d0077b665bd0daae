package envpolicy

import (
	"regexp"
	"slices"
	"strings"
	"sync"
)

// Redacted is what Redact writes in place of a secret.
const Redacted = "[redacted]"

// assignment finds NAME=value and --name=value in a command line: the
// name (group 1) and the value (group 2), quoted or not.
var assignment = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?:^|[\s;&|(` + "`" + `])(?:export\s+|--?)?([A-Za-z_][A-Za-z0-9_.-]*)=('[^']*'|"(?:[^"\\]|\\.)*"|[^\s;&|)'"` + "`" + `]+)`)
})

// authHeader finds the credential of an Authorization header written
// into a command (curl -H 'Authorization: Bearer …'): group 1.
var authHeader = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)\bauthorization:\s*(?:(?:bearer|basic|token|digest)\s+)?([^\s'"]+)`)
})

// codeNames are the names the scrub removes because they run code or
// change how a command line is read, not because they hold a secret:
// their values are what an auditor wants to read.
var codeNames = []string{"BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS", "PS4", "PROMPT_COMMAND", "BASH_XTRACEFD", "CDPATH", "GLOBIGNORE"}

// secretName reports whether a variable or option called name holds a
// credential by the scrub's name rules.
func secretName(name string) bool {
	upper := strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
	if strings.HasPrefix(upper, "CONCH_") || strings.HasPrefix(upper, "BASH_FUNC_") || slices.Contains(codeNames, upper) {
		return false
	}
	return Scrubbed(upper, "")
}

// Redact returns s with every secret in it replaced by Redacted: each
// value the scrub's value rules recognise (a token of a known shape, the
// password of a URL, a PEM private key to its END line), the value of an
// assignment or option whose name the scrub's name rules treat as a
// credential (`GITHUB_TOKEN=…`, `export DB_PASSWORD=…`, `--token=…`),
// and the credential of an Authorization header. The rest of s is kept,
// so that a reader still sees what ran. It is for text conch records
// (the audit log), never for what a command runs.
func Redact(s string) string {
	spans := secretSpans(s)
	if len(spans) == 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	last := 0
	for _, sp := range spans {
		b.WriteString(s[last:sp[0]])
		b.WriteString(Redacted)
		last = sp[1]
	}
	b.WriteString(s[last:])
	return b.String()
}

// secretSpans returns the byte ranges of the secrets in s, sorted and
// merged where they touch or overlap.
func secretSpans(s string) [][2]int {
	var spans [][2]int
	add := func(a, b int) {
		if a < b {
			spans = append(spans, [2]int{a, b})
		}
	}
	for _, re := range valueRules() {
		for _, m := range re.FindAllStringIndex(s, -1) {
			a, b := valueSpan(s, m[0], m[1])
			add(a, b)
		}
	}
	for _, m := range assignment().FindAllStringSubmatchIndex(s, -1) {
		if !secretName(s[m[2]:m[3]]) {
			continue
		}
		a, b := m[4], m[5]
		if b-a >= 2 && (s[a] == '\'' || s[a] == '"') && s[b-1] == s[a] {
			a, b = a+1, b-1 // keep the quotes: the reader sees the shape
		}
		add(a, b)
	}
	for _, m := range authHeader().FindAllStringSubmatchIndex(s, -1) {
		add(m[2], m[3])
	}
	if len(spans) == 0 {
		return nil
	}
	slices.SortFunc(spans, func(x, y [2]int) int { return x[0] - y[0] })
	merged := spans[:1]
	for _, sp := range spans[1:] {
		top := &merged[len(merged)-1]
		if sp[0] <= top[1] {
			top[1] = max(top[1], sp[1])
			continue
		}
		merged = append(merged, sp)
	}
	return merged
}

// valueSpan narrows a value rule's match [a,b) of s to the secret in it:
// the password of a URL (between the user's colon and the @), a PEM key
// from its BEGIN line to its END line (or the end of s), and otherwise
// the match without the boundary characters the rules match around a
// token.
func valueSpan(s string, a, b int) (int, int) {
	m := s[a:b]
	if i := strings.Index(m, "://"); i >= 0 && strings.HasSuffix(m, "@") {
		if j := strings.IndexByte(m[i+3:], ':'); j >= 0 {
			return a + i + 3 + j + 1, b - 1
		}
	}
	if strings.HasPrefix(m, "-----BEGIN ") && strings.HasSuffix(m, "PRIVATE KEY-----") {
		if j := strings.Index(s[b:], "-----END "); j >= 0 {
			end := b + j + len("-----END ")
			if k := strings.Index(s[end:], "-----"); k >= 0 {
				return a, end + k + len("-----")
			}
		}
		return a, len(s)
	}
	for a < b && !alnum(s[a]) {
		a++
	}
	for b > a && !alnum(s[b-1]) && !strings.ContainsRune("_-+/=", rune(s[b-1])) {
		b--
	}
	return a, b
}

// alnum reports whether c is an ASCII letter or digit: every token the
// value rules know starts with one.
func alnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
