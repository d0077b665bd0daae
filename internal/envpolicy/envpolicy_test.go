package envpolicy

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestScrubbed holds every rule to an example it must catch and a near
// miss it must let through.
func TestScrubbed(t *testing.T) {
	const (
		pem    = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn==\n-----END OPENSSH PRIVATE KEY-----"
		letter = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJ" // 36 letters
	)
	for _, c := range []struct {
		name, value string
		scrubbed    bool
	}{
		// The reference's rules, and wave one's.
		{"MY_API_KEY", "x", true},
		{"api_key", "x", true},
		{"GITHUB_TOKEN", "x", true},
		{"DB_PASSWORD", "x", true},
		{"X_SECRET", "x", true},
		{"AWS_SECRET_ACCESS_KEY", "x", true},
		{"SSH_PASSPHRASE", "x", true},
		{"GOOGLE_APPLICATION_CREDENTIALS", "/x.json", true},
		{"CONCH_STALE", "1", true},
		{"CONCH_SESSION_ID", "s", true},
		{"BASH_ENV", "/etc/profile", true},
		{"ENV", "/etc/profile", true},
		{"BASH_FUNC_f%%", "() { echo; }", true},
		{"PATH", "/bin", false},
		{"HOME", "/root", false},
		{"ENVIRONMENT", "prod", false},
		{"MONKEY_NAME", "x", true}, // KEY is a plain substring, as in the reference

		// Wave two's names: each reached commands.
		{"NPM_CONFIG__AUTH", "dTpw", true},
		{"HF_AUTH", "x", true},
		{"MYSQL_PWD", "pw", true},
		{"PGPASS", "pw", true},
		{"PGPASSFILE", "/x", true},
		{"SENTRY_DSN", "https://k@sentry.io/1", true},
		{"DSN", "x", true},
		{"SLACK_WEBHOOK_URL", "https://hooks.slack.com/services/T/B/x", true},
		{"DOCKER_AUTH_CONFIG", "{}", true},
		{"AUTH", "x", true},
		{"JWT", "e30.e30.x", true},
		{"ID_JWT", "e30.e30.x", true},
		{"SESSION_COOKIE", "c", true},
		{"FTP_PASSWD", "x", true},
		{"TLS_PRIVATE_KEY_FILE", "/k", true},
		{"SHELLOPTS", "xtrace", true},
		{"BASHOPTS", "extglob", true},
		{"PS4", "$(id)", true},
		{"PROMPT_COMMAND", "id", true},
		{"BASH_XTRACEFD", "1", true},
		{"CDPATH", "/tmp", true},
		{"GLOBIGNORE", "*", true},
		// Near misses of those names.
		{"GIT_AUTHOR_NAME", "A U Thor", false},
		{"GIT_AUTHOR_EMAIL", "a@example.com", false},
		{"PWD", "/w", false},
		{"OLDPWD", "/", false},
		{"AUTHOR", "x", false},
		{"OAUTH", "x", false},
		{"DSN_HOST", "h", false},
		{"JWTS_DIR", "/j", false},
		{"PS1", "$ ", false},
		{"BASH_VERSION", "5", false},
		{"ENV_FILE", "x", false},

		// By value, whatever the name.
		{"DATABASE_URL", "postgres://u:pw@h/db", true},
		{"REDIS_URL", "redis://:hunter2@cache:6379/0", true},
		{"PIP_INDEX_URL", "https://user:p%40ss@pypi.example.com/simple", true},
		{"DATABASE_URL", "postgres://h/db", false},
		{"PROXY", "http://user@proxy:3128", false},
		{"SITE", "https://example.com:8080/a@b", false},
		{"REMOTE", "git@github.com:org/repo.git", false},
		{"DEPLOY", pem, true},
		{"CERT", "-----BEGIN CERTIFICATE-----\nMII=", false},
		{"PUB", "-----BEGIN PUBLIC KEY-----\nMII=", false},
		{"OPENAI", "sk-proj-" + letter[:24], true},
		{"LIB", "sk-learn", false},
		{"DISK", "disk-" + letter, false},
		{"GH", "ghp_" + letter, true},
		{"GH2", "gho_" + letter, true},
		{"GH3", "ghu_" + letter, true},
		{"GH4", "ghs_" + letter, true},
		{"GH5", "ghr_" + letter, true},
		{"GH6", "github_pat_11AB_" + letter, true},
		{"GHX", "ghx_" + letter, false},
		{"GL", "glpat-" + letter[:20], true},
		{"SLACK", "xoxb-1234-5678-abcdef", true},
		{"SLACK2", "xoxc-1234-5678-abcdef", false},
		{"AWS", "AKIAIOSFODNN7EXAMPLE", true},
		{"AWS2", "id=AKIAIOSFODNN7EXAMPLE,x", true},
		{"AWS3", "AKIAIOSFODNN7EXAMPLEX", false}, // 17 characters: not an access key id
		{"GOOGLE", "AIza" + letter[:35], true},
		{"GOOGLE2", "AIza" + letter[:20], false},
		{"HF", "hf_" + letter[:30], true},
		{"HF2", "hf_" + letter[:10], false},
		{"HEADER", "Authorization: Bearer ghp_" + letter, true},

		// Wave three's names (issue 19 item 15): each reached commands.
		{"GITHUB_PAT", "x", true},
		{"GH_PAT", "x", true},
		{"PAT", "x", true},
		{"AZURE_DEVOPS_PAT_2", "x", true},
		{"github_pat", "x", true},
		{"DB_PASS", "x", true},
		{"MY_PASS", "x", true},
		{"PASS", "x", true},
		{"SMTP_PASS_FILE", "/p", true},
		{"AUTHORIZATION", "Basic dTpw", true},
		{"HTTP_AUTHORIZATION", "x", true},
		{"BEARER", "x", true},
		{"API_BEARER", "x", true},
		{"SESSION", "x", true},
		{"SESSIONID", "x", true},
		{"JSESSIONID", "x", true},
		{"FLASK_SESSION_ID", "x", true},
		{"PRIVATE", "x", true},
		{"GITLAB_PRIVATE", "x", true},
		{"DOCKER_HOST", "tcp://build.example.com:2376", true},
		{"DOCKER_HOST", "unix:///var/run/docker.sock", true},
		{"CONTAINER_HOST", "ssh://root@build/run/podman/podman.sock", true},
		// Near misses of those names.
		{"PATH", "/usr/bin", false},
		{"PYTHONPATH", "src", false},
		{"LD_LIBRARY_PATH", "/l", false},
		{"MANPATH", "/m", false},
		{"GIT_PATCH_LEVEL", "1", false},
		{"PATTERN", "x", false},
		{"COMPAT", "1", false},
		{"DISPATCH_URL", "https://d", false},
		{"BYPASS_CACHE", "1", false},
		{"PASSENGER_APP_ENV", "prod", false},
		{"COMPASS_HOME", "/c", false},
		{"XDG_SESSION_ID", "3", false},
		{"XDG_SESSION_TYPE", "wayland", false},
		{"XDG_SESSION_CLASS", "user", false},
		{"XDG_SESSION_DESKTOP", "gnome", false},
		{"DBUS_SESSION_BUS_ADDRESS", "unix:path=/run/user/1000/bus", false},
		{"DESKTOP_SESSION", "gnome", false},
		{"SESSION_MANAGER", "local/h:@/tmp/.ICE-unix/1", false},
		{"XDG_RUNTIME_DIR", "/run/user/1000", false},
		{"XDG_DATA_DIRS", "/usr/share", false},
		{"GIT_SSH_COMMAND", "ssh -i ~/.ssh/deploy -o IdentitiesOnly=yes", false},
		{"DOCKER_CONFIG", "/d", false},

		// Wave three's values (issue 19 item 15).
		{"NPM", "npm_" + letter, true},
		{"NPMRC", "//registry.npmjs.org/:_x=npm_" + letter, true},
		{"NPM2", "npm_" + letter[:30], false},
		{"NPM3", "npm_install_" + letter, false},
		{"STRIPE", "sk_live_" + letter[:24], true},
		{"STRIPE2", "rk_live_" + letter[:24], true},
		{"STRIPE3", "sk_test_" + letter[:24], true},
		{"STRIPE4", "sk_live_short", false},
		{"STRIPE5", "task_test_" + letter, false},
		{"AZURE_STORAGE", "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=" + letter + "==;EndpointSuffix=core.windows.net", true},
		{"SB", "Endpoint=sb://x.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccessKey=" + letter, true},
		{"MSSQL", "Server=db;Database=app;User Id=sa;Password=hunter2;", true},
		{"MSSQL2", "Server=db;Uid=sa;Pwd=hunter2", true},
		{"AZURE_STORAGE2", "DefaultEndpointsProtocol=https;AccountName=acct;EndpointSuffix=core.windows.net", false},
		{"NOTES", "AccountKeys are rotated monthly", false},
		{"DOC", "the password=field is documented", false},
	} {
		if got := Scrubbed(c.name, c.value); got != c.scrubbed {
			t.Errorf("Scrubbed(%q, %q) = %v, want %v", c.name, c.value, got, c.scrubbed)
		}
	}
}

// TestBasePass: a name the user passes survives every rule, and Base
// names each variable it dropped once, sorted.
func TestBasePass(t *testing.T) {
	base, scrubbed := Base([]string{
		"PATH=/bin", "Z_TOKEN=1", "GITHUB_TOKEN=a", "DATABASE_URL=postgres://u:pw@h/db", "GITHUB_TOKEN=b", "KEPT_KEY=k",
	}, []string{"KEPT_KEY", "NOT_SET"})
	if want := []string{"DATABASE_URL", "GITHUB_TOKEN", "Z_TOKEN"}; !slices.Equal(scrubbed, want) {
		t.Errorf("scrubbed %q, want %q", scrubbed, want)
	}
	if !slices.Contains(base, "KEPT_KEY=k") || !slices.Contains(base, "PATH=/bin") {
		t.Errorf("base %q", base)
	}
	for _, kv := range base {
		if strings.Contains(kv, "pw@") || strings.HasPrefix(kv, "GITHUB_TOKEN=") {
			t.Errorf("%q survived", kv)
		}
	}
}

// BenchmarkBase scrubs an environment of 60 variables, most of them
// kept, as a developer's shell has.
func BenchmarkBase(b *testing.B) {
	var env []string
	for _, kv := range []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/home/u", "USER=u", "SHELL=/bin/bash",
		"LANG=en_US.UTF-8", "TERM=xterm-256color", "PWD=/src/app", "OLDPWD=/src", "EDITOR=vim", "GOPATH=/home/u/go",
		"XDG_SESSION_ID=3", "XDG_RUNTIME_DIR=/run/user/1000", "DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/1000/bus",
		"GITHUB_TOKEN=ghp_abcdefghijklmnopqrstuvwxyzABCDEFGHIJ", "DATABASE_URL=postgres://u:pw@h/db",
		"SSH_AUTH_SOCK=/run/user/1000/ssh", "GIT_AUTHOR_NAME=A U Thor", "LS_COLORS=rs=0:di=01;34:ln=01;36:mh=00"} {
		env = append(env, kv)
	}
	for i := len(env); i < 60; i++ {
		env = append(env, fmt.Sprintf("TOOL_SETTING_%d=/opt/tool/%d/share/some/longer/value", i, i))
	}
	b.ReportAllocs()
	for b.Loop() {
		Base(env, nil)
	}
}

func TestLayers(t *testing.T) {
	base, _ := Base([]string{"PATH=/bin", "GITHUB_TOKEN=x", "TERM=xterm", "PAGER=less", "junk", "=nope"}, nil)
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
	base, _ := Base([]string{"PATH=/bin", "PWD=/server", "OLDPWD=/x"}, nil)
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
