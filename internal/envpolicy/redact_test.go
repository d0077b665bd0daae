package envpolicy

import (
	"strings"
	"testing"

	"pgregory.net/rapid"
)

func TestRedact(t *testing.T) {
	const ghp = "ghp_" + "abcdefghijklmnopqrstuvwxyz0123456789"
	for _, c := range []struct{ in, want string }{
		// Tokens of known shapes, wherever they stand.
		{"curl -H 'X: " + ghp + "' https://api.github.com", "curl -H 'X: [redacted]' https://api.github.com"},
		{"git push https://x:" + ghp + "@github.com/o/r", "git push https://x:[redacted]@github.com/o/r"},
		{"echo " + ghp + "; ls", "echo [redacted]; ls"},
		{"x=" + ghp, "x=[redacted]"},
		{"OPENAI=sk-abcdefghijklmnopqrstuvwxyz python a.py", "OPENAI=[redacted] python a.py"},
		{"aws --key AKIAABCDEFGHIJKLMNOP s3 ls", "aws --key [redacted] s3 ls"},
		// URL passwords keep the scheme, the user and the host.
		{"psql postgres://app:hunter2@db:5432/x", "psql postgres://app:[redacted]@db:5432/x"},
		{"redis-cli -u redis://:s3cret@cache:6379", "redis-cli -u redis://:[redacted]@cache:6379"},
		// Credentials by name, quoted or not, exported, as options.
		{"GITHUB_TOKEN=abc123 gh pr list", "GITHUB_TOKEN=[redacted] gh pr list"},
		{"export DB_PASSWORD='p a ss'; ./migrate", "export DB_PASSWORD='[redacted]'; ./migrate"},
		{`mysql --password="x y" -u root`, `mysql --password="[redacted]" -u root`},
		{"deploy --api-key=k1 --verbose", "deploy --api-key=[redacted] --verbose"},
		{"curl -H 'Authorization: Bearer eyJhbGc.x.y' http://h", "curl -H 'Authorization: Bearer [redacted]' http://h"},
		// A PEM key to its END line.
		{"printf '-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----' > k; ls", "printf '[redacted]' > k; ls"},
		// Not secrets: kept as typed, start-up names included (an
		// auditor wants to read them).
		{"ls -la /tmp && git status", "ls -la /tmp && git status"},
		{"PS4='$(id)' SHELLOPTS=xtrace bash -c true", "PS4='$(id)' SHELLOPTS=xtrace bash -c true"},
		{"FOO=bar make", "FOO=bar make"},
		{"disk-abcdefghijklmnopqrstuvwxyz", "disk-abcdefghijklmnopqrstuvwxyz"},
		{"https://example.com/a:b@c", "https://example.com/a:b@c"},
	} {
		if got := Redact(c.in); got != c.want {
			t.Errorf("Redact(%q)\n got %q\nwant %q", c.in, got, c.want)
		}
	}
}

// TestRedactProperties: whatever surrounds a secret, it never survives,
// and text without one is left alone.
func TestRedactProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		secret := rapid.SampledFrom([]string{
			"ghp_" + strings.Repeat("Q", 36),
			"sk-" + strings.Repeat("a1", 12),
			"glpat-" + strings.Repeat("z", 20),
			"xoxb-" + strings.Repeat("9", 12),
		}).Draw(t, "secret")
		sep := rapid.SampledFrom([]string{" ", "=", "'", "\"", ":", ";", "\n", "(", ","}).Draw(t, "sep")
		before := rapid.StringMatching(`[a-z /|&;]{0,20}`).Draw(t, "before")
		after := rapid.StringMatching(`[a-z /|&;]{0,20}`).Draw(t, "after")
		in := before + sep + secret + sep + after
		out := Redact(in)
		if strings.Contains(out, secret[4:]) {
			t.Fatalf("Redact(%q) = %q keeps the secret", in, out)
		}
		if !strings.Contains(out, Redacted) {
			t.Fatalf("Redact(%q) = %q says nothing was redacted", in, out)
		}
		plain := rapid.StringMatching(`[a-z0-9 ./|&;-]{0,60}`).Draw(t, "plain")
		if got := Redact(plain); got != plain {
			t.Fatalf("Redact(%q) = %q changed text without a secret", plain, got)
		}
	})
}
