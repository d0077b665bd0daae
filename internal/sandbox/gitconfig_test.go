package sandbox

import (
	"slices"
	"testing"
)

func TestSanitizeGitConfig(t *testing.T) {
	keep := func(e gitEntry) bool { return e.keptByDefault() }
	cases := []struct {
		name, in, want string
		dropped        []string
	}{
		{
			name: "what git init and clone write is kept as it is",
			in: "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n" +
				"[remote \"origin\"]\n\turl = /src/repo\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n" +
				"[branch \"main\"]\n\tremote = origin\n\tmerge = refs/heads/main\n",
			want: "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n" +
				"[remote \"origin\"]\n\turl = /src/repo\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n" +
				"[branch \"main\"]\n\tremote = origin\n\tmerge = refs/heads/main\n",
		},
		{
			name: "code-running keys are dropped, the rest kept in order",
			in: "[core]\n\tbare = false\n\tfsmonitor = \"touch /tmp/pwned\"\n\thooksPath = /tmp/h\n" +
				"[include]\n\tpath = /tmp/evil.cfg\n[alias]\n\tst = !sh -c evil\n[user]\n\tname = A \"B\" C # comment\n" +
				"[filter \"x\"]\n\tclean = evil\n[remote \"o\"]\n\turl = /r\n\tuploadpack = evil\n",
			want:    "[core]\n\tbare = false\n[user]\n\tname = A B C\n[remote \"o\"]\n\turl = /r\n",
			dropped: []string{"core.fsmonitor", "core.hookspath", "include.path", "alias.st", "filter.x.clean", "remote.o.uploadpack"},
		},
		{
			name:    "legacy subsections, case, continuation lines, a key on the header's line",
			in:      "[Core] FSMonitor = a\\\nb\n[remote.O]\n\tURL = x\n[includeIf \"gitdir:/\"]\npath=/e\n",
			want:    "[remote \"o\"]\n\turl = x\n",
			dropped: []string{"core.fsmonitor", "includeif.gitdir:/.path"},
		},
		{
			name:    "a line git would refuse ends the file",
			in:      "[user]\nname = a\n[core\nfsmonitor = evil\n",
			want:    "[user]\n\tname = a\n",
			dropped: []string{"(a line git would refuse)"},
		},
		{
			name: "a bare key", in: "[core]\n\tbare\n\tpager\n", want: "[core]\n\tbare\n", dropped: []string{"core.pager"},
		},
		{
			name:    "values git would read differently stay quoted",
			in:      "[user]\n\tname = \" a # b\\\\ \"\n\temail = \"\"\n[core]\n\teditor = vi\n",
			want:    "[user]\n\tname = \" a # b\\\\ \"\n\temail = \"\"\n",
			dropped: []string{"core.editor"},
		},
	}
	for _, c := range cases {
		out, dropped := sanitizeGitConfig([]byte(c.in), keep)
		if string(out) != c.want || !slices.Equal(dropped, c.dropped) {
			t.Errorf("%s:\n got %q, dropped %q\nwant %q, dropped %q", c.name, out, dropped, c.want, c.dropped)
		}
		// What it writes parses to what it kept.
		if again, d := sanitizeGitConfig(out, keep); string(again) != string(out) || d != nil {
			t.Errorf("%s: the sanitised file is not stable: %q, %q", c.name, again, d)
		}
	}
}

func TestSensitive(t *testing.T) {
	for p, want := range map[string]bool{
		"/ws/.git/config": true, "/ws/.git": true, "/ws/sub/hooks": true, "/ws/src/main.go": false,
		"/ws/configs/a": false, "/ws/a.git/x": false, "/ws/x/config.worktree": true, "/ws/node_modules/p/HEAD": true,
		"/ws/objects2": false, "/ws/info": true,
	} {
		if got := sensitive(p); got != want {
			t.Errorf("sensitive(%q) = %v, want %v", p, got, want)
		}
	}
}
