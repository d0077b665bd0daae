package envpolicy

import (
	"slices"
	"strings"
	"testing"
)

func TestScrubbed(t *testing.T) {
	for _, name := range []string{
		"MY_API_KEY", "api_key", "GITHUB_TOKEN", "DB_PASSWORD", "X_SECRET", "AWS_SECRET_ACCESS_KEY",
		"SSH_PASSPHRASE", "GOOGLE_APPLICATION_CREDENTIALS", "CONCH_STALE", "CONCH_SESSION_ID",
		"BASH_ENV", "ENV", "BASH_FUNC_f%%",
	} {
		if !Scrubbed(name) {
			t.Errorf("%s is not scrubbed", name)
		}
	}
	for _, name := range []string{"PATH", "HOME", "LANG", "GOPATH", "ENVIRONMENT", "USER"} {
		if Scrubbed(name) {
			t.Errorf("%s is scrubbed", name)
		}
	}
}

func TestLayers(t *testing.T) {
	base := Base([]string{"PATH=/bin", "GITHUB_TOKEN=x", "TERM=xterm", "PAGER=less", "junk", "=nope"})
	got := Build(base, "",
		map[string]string{"PAGER": "more", "GITHUB_TOKEN": "explicit", "CONCH_SHELL": "0"},
		map[string]string{"CONCH_SHELL": "1"})
	want := map[string]string{"PATH": "/bin", "TERM": "dumb", "PAGER": "more", "GITHUB_TOKEN": "explicit", "CONCH_SHELL": "1", "NO_COLOR": "1"}
	seen := map[string]int{}
	for _, kv := range got {
		for k, v := range want {
			if kv == k+"="+v {
				seen[k]++
			}
		}
	}
	for k := range want {
		if seen[k] != 1 {
			t.Errorf("%s=%s appears %d times in %v", k, want[k], seen[k], got)
		}
	}
	for _, kv := range got {
		if kv == "junk" || kv == "=nope" || kv == "TERM=xterm" || kv == "PAGER=less" || kv == "CONCH_SHELL=0" {
			t.Errorf("stale entry %q", kv)
		}
	}
	if b2 := Build(base, "", nil, nil); !slices.Equal(b2, base) {
		t.Error("Build without layers changed base")
	}
	if &Build(base, "", nil, nil)[0] != &base[0] {
		t.Error("Build without layers copied base")
	}
	before := slices.Clone(base)
	Build(base, "", map[string]string{"TERM": "x"}, nil)
	if !slices.Equal(before, base) {
		t.Error("Build modified base")
	}
}

func TestBuildSetsPWD(t *testing.T) {
	base := Base([]string{"PATH=/bin", "PWD=/server", "OLDPWD=/x"})
	got := Build(base, "/work/dir", map[string]string{"A": "1"}, map[string]string{"CONCH_SHELL": "1"})
	pwd := 0
	for _, kv := range got {
		if strings.HasPrefix(kv, "PWD=") {
			pwd++
			if kv != "PWD=/work/dir" {
				t.Errorf("stale %q", kv)
			}
		}
	}
	if pwd != 1 || !slices.Contains(got, "A=1") || !slices.Contains(got, "CONCH_SHELL=1") {
		t.Errorf("Build = %v", got)
	}
	if over := Build(base, "/d", map[string]string{"PWD": "/mine"}, nil); !slices.Contains(over, "PWD=/mine") || slices.Contains(over, "PWD=/d") {
		t.Errorf("Env does not win over the workdir's PWD: %v", over)
	}
	if !slices.Contains(base, "PWD=/server") {
		t.Error("Build modified base")
	}
}
