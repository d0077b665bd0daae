package sandbox

import (
	"strings"
	"sync"
)

// A git configuration written during a session (docs/sandbox.md#git)
// keeps only the keys git writes itself and that run nothing and read
// nothing from elsewhere; every other key is dropped. Dropped among
// others: core.fsmonitor, core.hooksPath, core.sshCommand, core.pager,
// core.editor, core.askPass, core.gitProxy, core.attributesFile,
// include.path, includeIf.*, alias.*, filter.*, diff.*.command,
// diff.*.textconv, diff.external, merge.*.driver, credential.*,
// remote.*.uploadpack, remote.*.receivepack, remote.*.vcs,
// protocol.*, url.*, http.*, uploadpack.*, submodule.*.update.

// gitKeepKeys are the keys kept, as section.key or section.*.key
// (lowercase; * is any subsection). The set is built at its first use,
// not at the start of every conch process.
var gitKeepKeys = sync.OnceValue(func() map[string]bool {
	keys := map[string]bool{}
	for _, k := range strings.Fields(`
core.repositoryformatversion core.filemode core.bare core.logallrefupdates core.ignorecase
core.precomposeunicode core.symlinks core.autocrlf core.eol core.safecrlf core.sparsecheckout
core.sparsecheckoutcone core.quotepath core.longpaths core.checkstat core.trustctime core.splitindex
core.untrackedcache core.commitgraph core.multipackindex core.compression core.loosecompression
core.bigfilethreshold core.abbrev core.commentchar core.commentstring core.preloadindex
core.deltabasecachelimit core.packedgitlimit core.packedgitwindowsize core.warnambiguousrefs
core.sharedrepository
extensions.objectformat extensions.compatobjectformat extensions.refstorage extensions.worktreeconfig
extensions.partialclone extensions.preciousobjects extensions.noop
remote.*.url remote.*.pushurl remote.*.fetch remote.*.push remote.*.tagopt remote.*.prune
remote.*.prunetags remote.*.mirror remote.*.skipdefaultupdate remote.*.skipfetchall remote.*.promisor
remote.*.partialclonefilter remote.*.followremotehead
branch.*.remote branch.*.pushremote branch.*.merge branch.*.rebase branch.*.description
submodule.*.url submodule.*.active submodule.*.branch submodule.*.fetchrecursesubmodules
submodule.*.ignore submodule.*.shallow
user.name user.email init.defaultbranch clone.defaultremotename
pull.rebase pull.ff push.default push.autosetupremote
fetch.prune fetch.prunetags fetch.recursesubmodules fetch.writecommitgraph
gc.auto gc.autodetach gc.autopacklimit gc.writecommitgraph gc.reflogexpire gc.reflogexpireunreachable
index.version index.threads index.skiphash feature.manyfiles feature.experimental
maintenance.auto maintenance.strategy rerere.enabled rerere.autoupdate
merge.ff merge.conflictstyle merge.renames merge.stat merge.log
diff.renames diff.algorithm diff.mnemonicprefix diff.noprefix diff.context
status.showuntrackedfiles status.submodulesummary lfs.repositoryformatversion
`) {
		keys[k] = true
	}
	return keys
})

// gitEntry is one variable of a git configuration file.
type gitEntry struct {
	section    string // lowercase
	subsection string // as written; "" for none
	hasSub     bool
	key        string // lowercase
	value      string
	bare       bool // "key" alone: true
}

// name is section[.subsection].key, as git names it.
func (e gitEntry) name() string {
	if e.hasSub {
		return e.section + "." + e.subsection + "." + e.key
	}
	return e.section + "." + e.key
}

// keptByDefault reports whether e is one of gitKeepKeys (color.* and
// advice.* too: colours and hints).
func (e gitEntry) keptByDefault() bool {
	if e.section == "color" || e.section == "advice" {
		return true
	}
	if e.hasSub {
		return gitKeepKeys()[e.section+".*."+e.key]
	}
	return gitKeepKeys()[e.section+"."+e.key]
}

// parseGitConfig parses a git configuration file as git's config.c
// does, and returns its variables in order; ok is false when it stopped
// at a line git would refuse (git then refuses the whole file).
func parseGitConfig(b []byte) (entries []gitEntry, ok bool) {
	s := string(b)
	s = strings.TrimPrefix(s, "\ufeff")
	i := 0
	var sec, sub string
	var hasSub, inSection bool
	peek := func() byte {
		if i < len(s) {
			return s[i]
		}
		return 0
	}
	skipLine := func() {
		for i < len(s) && s[i] != '\n' {
			i++
		}
	}
	for i < len(s) {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '#' || c == ';':
			skipLine()
		case c == '[':
			i++
			start := i
			for i < len(s) && (isAlnum(s[i]) || s[i] == '-' || s[i] == '.') {
				i++
			}
			name := strings.ToLower(s[start:i])
			if name == "" {
				return entries, false
			}
			hasSub, sub = false, ""
			if dot := strings.IndexByte(name, '.'); dot >= 0 {
				// Deprecated [section.subsection]: lowercased.
				sec, sub, hasSub = name[:dot], name[dot+1:], true
			} else {
				sec = name
			}
			for peek() == ' ' || peek() == '\t' {
				i++
			}
			if peek() == '"' {
				if hasSub {
					return entries, false
				}
				i++
				var b strings.Builder
				for {
					if i >= len(s) || s[i] == '\n' {
						return entries, false
					}
					ch := s[i]
					i++
					if ch == '"' {
						break
					}
					if ch == '\\' {
						if i >= len(s) || s[i] == '\n' {
							return entries, false
						}
						ch = s[i]
						i++
					}
					b.WriteByte(ch)
				}
				sub, hasSub = b.String(), true
			}
			if peek() != ']' {
				return entries, false
			}
			i++
			inSection = true
		case isAlpha(c):
			if !inSection {
				return entries, false
			}
			start := i
			for i < len(s) && (isAlnum(s[i]) || s[i] == '-') {
				i++
			}
			e := gitEntry{section: sec, subsection: sub, hasSub: hasSub, key: strings.ToLower(s[start:i])}
			for peek() == ' ' || peek() == '\t' {
				i++
			}
			switch peek() {
			case '=':
				i++
				v, ok := parseGitValue(s, &i)
				if !ok {
					return entries, false
				}
				e.value = v
			case '\n', '\r', '#', ';', 0:
				e.bare = true
				skipLine()
			default:
				return entries, false
			}
			entries = append(entries, e)
		default:
			return entries, false
		}
	}
	return entries, true
}

// parseGitValue parses a value from s[*i] to its line's end.
func parseGitValue(s string, i *int) (string, bool) {
	var b strings.Builder
	quote, comment := false, false
	space := 0
	for ; *i < len(s); *i++ {
		c := s[*i]
		if c == '\n' {
			if quote {
				return "", false
			}
			*i++
			return b.String(), true
		}
		if comment {
			continue
		}
		if (c == ' ' || c == '\t' || c == '\r') && !quote {
			if b.Len() > 0 {
				space++
			}
			continue
		}
		if !quote && (c == ';' || c == '#') {
			comment = true
			continue
		}
		for ; space > 0; space-- {
			b.WriteByte(' ')
		}
		if c == '\\' {
			*i++
			if *i >= len(s) {
				return "", false
			}
			switch s[*i] {
			case '\n':
				continue
			case 't':
				b.WriteByte('\t')
			case 'b':
				b.WriteByte('\b')
			case 'n':
				b.WriteByte('\n')
			case '\\', '"':
				b.WriteByte(s[*i])
			default:
				return "", false
			}
			continue
		}
		if c == '"' {
			quote = !quote
			continue
		}
		b.WriteByte(c)
	}
	if quote {
		return "", false
	}
	return b.String(), true
}

func isAlpha(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isAlnum(c byte) bool { return isAlpha(c) || c >= '0' && c <= '9' }

// sanitizeGitConfig returns b unchanged when every variable in it is
// kept (keep), and otherwise a configuration of the kept variables
// alone, in order, with the names of those dropped. A file git would
// refuse keeps what parsed before the line git refuses.
func sanitizeGitConfig(b []byte, keep func(gitEntry) bool) ([]byte, []string) {
	entries, ok := parseGitConfig(b)
	var kept []gitEntry
	var dropped []string
	for _, e := range entries {
		if keep(e) {
			kept = append(kept, e)
		} else {
			dropped = append(dropped, e.name())
		}
	}
	if ok && len(dropped) == 0 {
		return b, nil
	}
	if !ok {
		dropped = append(dropped, "(a line git would refuse)")
	}
	var out strings.Builder
	var cur string
	for _, e := range kept {
		head := "[" + e.section + "]"
		if e.hasSub {
			head = "[" + e.section + " " + quoteSub(e.subsection) + "]"
		}
		if head != cur {
			out.WriteString(head + "\n")
			cur = head
		}
		if e.bare {
			out.WriteString("\t" + e.key + "\n")
		} else {
			out.WriteString("\t" + e.key + " = " + quoteGit(e.value) + "\n")
		}
	}
	return []byte(out.String()), dropped
}

// quoteGit writes a value for a git configuration file: quoted when
// git would otherwise read it differently.
func quoteGit(v string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\t", `\t`, "\b", `\b`)
	if v != "" && v == strings.TrimSpace(v) && !strings.ContainsAny(v, "#;\"\\\n\t\b") {
		return v
	}
	return `"` + r.Replace(v) + `"`
}

// quoteSub writes a subsection name, always quoted.
func quoteSub(v string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(v) + `"`
}
