package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	cfgfile "github.com/conch-dev/conch/internal/config"
	"github.com/conch-dev/conch/mcpserver"
)

// Named HTTP clients, [[mcp.clients]] in the configuration file
// (docs/transports.md#named-http-clients): each a name, a token and
// optionally a cwd. Only conch serve reads them; conch config serve shows
// them, never their tokens.

// clientFields are the keys of one [[mcp.clients]] element.
var clientFields = []string{"name", "token", "cwd"}

// clientName reports whether v may be a client's name (it becomes
// CONCH_SESSION_ID): a host name's characters, at most 64 of them. (The
// bound is not the pattern's `{0,63}`: compiled at every start of the
// binary, the inits' and agents' too, that repetition alone cost 0.5 ms.)
func clientName(v string) bool { return len(v) <= 64 && hostName().MatchString(v) }

// reservedName are the names of the other owners: http (the single
// token's), stdio and the MCP sessions' http-<n> and stdio-<n>.
var reservedName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(http|stdio)(-[0-9]+)?$`) })

// mcpClient is one [[mcp.clients]] element as the file gives it.
type mcpClient struct {
	mcpserver.Client
	at string // where the element starts, for conch config and errors
}

// applyClientEntry takes e if it is a key of [[mcp.clients]]; handled
// reports that it was. Subcommands other than serve ignore the keys.
func (s *settings) applyClientEntry(e cfgfile.Entry) (handled bool, err error) {
	rest, ok := strings.CutPrefix(e.Key, "mcp.clients.")
	if !ok {
		return false, nil
	}
	idx, field, ok := strings.Cut(rest, ".")
	n, err := strconv.Atoi(idx)
	if !ok || err != nil || n < 1 || !slices.Contains(clientFields, field) {
		return true, &cfgfile.Error{File: e.File, Line: e.Line, Key: e.Key, Err: errors.New("unknown key (a client takes " + strings.Join(clientFields, ", ") + ")")}
	}
	if e.Array {
		return true, &cfgfile.Error{File: e.File, Line: e.Line, Key: e.Key, Err: errors.New("takes one value, not a list")}
	}
	if s.fs.Lookup("http") == nil {
		return true, nil // not conch serve
	}
	for len(s.clients) < n {
		s.clients = append(s.clients, mcpClient{at: e.Where()})
	}
	c := &s.clients[n-1]
	switch v := e.Values[0]; field {
	case "name":
		if !clientName(v) || reservedName().MatchString(v) {
			return true, &cfgfile.Error{File: e.File, Line: e.Line, Key: e.Key, Err: fmt.Errorf("%q is not a client name (letters, digits, '_', '.', '-'; not http or stdio)", v)}
		}
		for _, o := range s.clients {
			if o.Name == v {
				return true, &cfgfile.Error{File: e.File, Line: e.Line, Key: e.Key, Err: fmt.Errorf("client %s is already configured at %s", v, o.at)}
			}
		}
		c.Name, c.at = v, e.Where()
	case "token":
		if len(v) < 16 {
			return true, &cfgfile.Error{File: e.File, Line: e.Line, Key: e.Key, Err: errors.New("a client token must have at least 16 characters")}
		}
		c.Token = v
	case "cwd":
		if !filepath.IsAbs(v) {
			return true, &cfgfile.Error{File: e.File, Line: e.Line, Key: e.Key, Err: errors.New("must be an absolute path")}
		}
		c.Cwd = filepath.Clean(v)
	}
	return true, nil
}

// checkClients refuses a client without a name or a token, and two with
// one token.
func (s *settings) checkClients() error {
	tokens := map[string]string{}
	for _, c := range s.clients {
		file, line := splitWhere(c.at)
		switch {
		case c.Name == "":
			return &cfgfile.Error{File: file, Line: line, Key: "mcp.clients", Err: errors.New("a client needs a name")}
		case c.Token == "":
			return &cfgfile.Error{File: file, Line: line, Key: "mcp.clients", Err: fmt.Errorf("client %s needs a token", c.Name)}
		case tokens[c.Token] != "":
			return &cfgfile.Error{File: file, Line: line, Key: "mcp.clients", Err: fmt.Errorf("client %s has the token of client %s", c.Name, tokens[c.Token])}
		}
		tokens[c.Token] = c.Name
	}
	return nil
}

// serverClients are the named clients as the MCP server takes them.
func (s *settings) serverClients() []mcpserver.Client {
	out := make([]mcpserver.Client, 0, len(s.clients))
	for _, c := range s.clients {
		out = append(out, c.Client)
	}
	return out
}

// printClients writes the named clients for conch config: the name and
// the cwd, the token only as (set).
func (s *settings) printClients(w io.Writer) {
	for _, c := range s.clients {
		cwd := ""
		if c.Cwd != "" {
			cwd = fmt.Sprintf(", cwd = %q", c.Cwd)
		}
		fmt.Fprintf(w, "mcp.clients = {name = %q, token = (set)%s}  # %s\n", c.Name, cwd, c.at)
	}
}

func splitWhere(at string) (string, int) {
	i := strings.LastIndexByte(at, ':')
	if i < 0 {
		return at, 0
	}
	n, _ := strconv.Atoi(at[i+1:])
	return at[:i], n
}
