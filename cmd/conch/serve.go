package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/conch-dev/conch/mcpserver"
)

const serveUsage = `Usage: conch serve [flags]

Serve conch's tools (bash, task_output, task_list, task_kill) over MCP: on
stdin/stdout by default, or over streamable HTTP with --http ADDR (endpoint
http://ADDR/mcp). Logs go to stderr.

Stdio is one session; over HTTP every MCP session has its own background
tasks and working directory. A session's working directory is the client's
first file:// root when it offers roots, else --cwd.

HTTP binds where --http says, 127.0.0.1 when ADDR is only a port (7433 or
:7433). Any other address must be named (0.0.0.0:7433) and needs a bearer
token (--token, or CONCH_TOKEN, which keeps it out of the process list):
conch refuses to start without one, and a request without
"Authorization: Bearer <token>" gets 401. Host and Origin headers are
checked against DNS rebinding and cross-site browser requests.

SIGINT, SIGTERM or the end of stdin (stdio) stop the server cleanly: every
task and every process it started is killed, spill files are removed, and
conch exits 0.

Flags:
`

// serveCommand is `conch serve`.
func serveCommand(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("conch serve", flag.ContinueOnError)
	var c config
	c.addFlags(fs, 45000)
	httpAddr := fs.String("http", "", "serve streamable HTTP on `ADDR` (host:port; a bare port means 127.0.0.1) instead of stdio")
	token := fs.String("token", "", "bearer token HTTP clients must send (default $CONCH_TOKEN); required when --http is not a loopback address")
	if code, ok := parseFlags(fs, args, serveUsage, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "conch serve: unexpected argument %q\nRun 'conch serve --help' for usage.\n", fs.Arg(0))
		return 2
	}
	tok := *token
	if tok == "" {
		tok = os.Getenv("CONCH_TOKEN")
	}
	addr := *httpAddr
	if addr != "" {
		var err error
		if addr, err = listenAddr(addr); err != nil {
			fmt.Fprintf(stderr, "conch serve: invalid value %q for flag -http: %v\n", *httpAddr, err)
			return 2
		}
		if !mcpserver.LoopbackAddr(addr) && tok == "" {
			fmt.Fprintf(stderr, "conch serve: --http %s is not a loopback address: set a bearer token with --token or CONCH_TOKEN\n", addr)
			return 2
		}
	}

	var ln net.Listener
	if addr != "" {
		var err error
		if ln, err = net.Listen("tcp", addr); err != nil {
			fmt.Fprintf(stderr, "conch serve: --http %s: %v\n", addr, err)
			return 1
		}
	}

	log := slog.New(slog.NewTextHandler(stderr, nil))
	c.maxWait = mcpserver.MaxWait
	st, err := c.build(log)
	if err != nil {
		if ln != nil {
			ln.Close()
		}
		fmt.Fprintf(stderr, "conch serve: %v\n", err)
		return 2
	}
	srv := mcpserver.New(st.tools, &mcpserver.Options{Version: version, Logger: log, Token: tok})

	code := 0
	if addr == "" {
		// A client that closes our stdout must not kill us with SIGPIPE
		// before we clean up: with the signal handled, the write fails
		// and the session ends. (Handled, unlike ignored, signals are
		// reset for the commands we spawn.)
		signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
		log.Info("serving MCP on stdio", "version", version)
		if err := srv.ServeStdio(ctx, stdin, stdout); err != nil {
			log.Error("stdio transport failed", "error", err)
			code = 1
		}
	} else if err := serveHTTP(ctx, srv, ln, log); err != nil {
		log.Error("http transport failed", "error", err)
		code = 1
	}
	srv.Close()
	if err := st.close(); err != nil {
		log.Error("shutdown", "error", err)
		code = 1
	}
	log.Info("stopped")
	return code
}

// listenAddr is where --http binds: a bare port ("7433" or ":7433")
// means 127.0.0.1; other interfaces must be named (0.0.0.0:7433).
func listenAddr(flagValue string) (string, error) {
	if _, err := strconv.ParseUint(flagValue, 10, 16); err == nil {
		flagValue = ":" + flagValue
	}
	host, port, err := net.SplitHostPort(flagValue)
	if err != nil {
		return "", err
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return "", errors.New("the port must be a number from 0 to 65535")
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), nil
}

// serveHTTP serves srv on ln until ctx is done.
func serveHTTP(ctx context.Context, srv *mcpserver.Server, ln net.Listener, log *slog.Logger) error {
	hs := &http.Server{
		Handler:           srv.HTTPHandler(),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	log.Info("serving MCP over streamable HTTP", "url", "http://"+ln.Addr().String()+"/mcp", "version", version)
	select {
	case <-ctx.Done():
		// Close, not Shutdown: event streams never go idle. Calls in
		// flight are cancelled by the server's Close next.
		hs.Close()
		<-errc
		return nil
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	}
}

// parseFlags parses a subcommand's flags. --help prints usage (then the
// flags) to stdout; a bad flag is reported on stderr, naming the flag.
// ok is false when the caller should return code.
func parseFlags(fs *flag.FlagSet, args []string, usage string, stdout, stderr io.Writer) (code int, ok bool) {
	fs.SetOutput(stderr)
	fs.Usage = func() {}
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(stdout, usage)
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		return 0, false
	case err != nil:
		fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", fs.Name())
		return 2, false
	}
	return 0, true
}
