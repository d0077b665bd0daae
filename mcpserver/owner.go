package mcpserver

import (
	"context"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// defaultOwner is the owner over HTTP, at MCP 2026-07-28, of the requests
// that carry the single token (Options.Token).
const defaultOwner = "http"

// owner is an HTTP client of MCP 2026-07-28 and later: without sessions,
// the client (its token) owns the tasks, spill files and grants that an
// MCP session owns on older revisions. Each has an SDK server of its own,
// served statelessly: every request stands alone, and all of them belong
// to the owner.
type owner struct {
	x       *session
	handler http.Handler
}

// ownerHTTP returns the owner of the HTTP client named client ("" for the
// single token), made on first use. It fails after Close.
func (s *Server) ownerHTTP(client string) (*owner, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if o := s.owners[client]; o != nil {
		return o, nil
	}
	id, home := defaultOwner, ""
	for _, c := range s.opts.Clients {
		if c.Name == client && client != "" {
			id, home = c.Name, c.Cwd
		}
	}
	x, err := s.newSessionLocked(id)
	if err != nil {
		return nil, err
	}
	x.client, x.home = client, home
	srv := s.newMCP(func(context.Context, *mcp.ServerSession) (*session, error) { return x, nil })
	o := &owner{x: x, handler: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Stateless: true, Logger: s.sdkLog(), MaxRequestBodyBytes: maxBody,
			// The POST is the whole request: a client that gives it up
			// cancels the call, whose process group is killed.
			PropagateRequestCancellation: true})}
	s.owners[client] = o
	s.log.Info("owner started", "owner", x.id, "transport", "http")
	// An owner lasts as long as the server: its tasks wait for its
	// client's next request, whenever that comes.
	go func() {
		<-x.ctx.Done()
		s.finish(x)
	}()
	return o, nil
}
