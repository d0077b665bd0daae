package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

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
:7433); any other address must be named (0.0.0.0:7433). Every request must
carry "Authorization: Bearer <token>", on loopback too (other users of the
machine reach loopback as well), or it gets 401. The token is --token, or
CONCH_TOKEN (which keeps it out of the process list); without either,
conch uses the token in $XDG_RUNTIME_DIR/conch/token (else in its state
directory), creating that file, readable by you only, with a random token
if it holds none, and logs the file's path. Host and Origin headers are
checked against DNS rebinding and cross-site browser requests.

SIGINT, SIGTERM or the end of stdin (stdio) stop the server cleanly: every
task and every process it started is killed, spill files are removed, and
conch exits 0.

Flags:
`

// serveFlags defines the flags only conch serve has.
func serveFlags(fs *flag.FlagSet) (httpAddr, token *string) {
	httpAddr = fs.String("http", "", "serve streamable HTTP on `ADDR` (host:port; a bare port means 127.0.0.1) instead of stdio")
	token = fs.String("token", "", "bearer token HTTP clients must send (default $CONCH_TOKEN, else the token file's)")
	return httpAddr, token
}

// serveCommand is `conch serve`.
func serveCommand(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("conch serve", flag.ContinueOnError)
	var c config
	c.addFlags(fs, 45000, slog.LevelInfo)
	httpAddr, token := serveFlags(fs)
	set, code, ok := parseFlags(fs, args, serveUsage, stdout, stderr)
	if !ok {
		return code
	}
	c.rules = set.rules
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
	}

	var ln net.Listener
	if addr != "" {
		var err error
		if ln, err = net.Listen("tcp", addr); err != nil {
			fmt.Fprintf(stderr, "conch serve: --http %s: %v\n", addr, err)
			return 1
		}
	}

	log := c.newLogger(stderr)
	if addr != "" && tok == "" {
		path := tokenPath()
		var err error
		if tok, err = fileToken(path); err != nil {
			ln.Close()
			fmt.Fprintf(stderr, "conch serve: %v\n", err)
			return 1
		}
		log.Info("HTTP clients must send the bearer token in the token file", "tokenFile", path)
	}
	c.maxWait = mcpserver.MaxWait
	c.configFile = set.file
	c.net.own = ownListeners(ln) // refused to commands (docs/security.md)
	c.spareInits = true
	c.warm = true
	st, err := c.build(log)
	if err != nil {
		if ln != nil {
			ln.Close()
		}
		fmt.Fprintf(stderr, "conch serve: %v\n", err)
		return 2
	}
	st.logStart(log, "serve", set)
	mo := &mcpserver.Options{Version: version, Logger: log, Token: tok, Clients: set.serverClients()}
	if st.ops.metrics != nil {
		mo.Metrics = st.ops.metrics.Handler()
	}
	srv := mcpserver.New(st.tools, mo)

	code = 0
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
	log.Info("serving MCP over streamable HTTP", "url", "http://"+ln.Addr().String()+"/mcp", "version", version)
	return srv.Serve(ctx, ln)
}

// tokenPath is the token file of conch serve --http:
// $XDG_RUNTIME_DIR/conch/token (the user's own, gone at logout), else
// token in the state directory.
func tokenPath() string {
	if d := os.Getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(d) {
		return filepath.Join(d, "conch", "token")
	}
	return filepath.Join(stateDir(), "token")
}

// tokenBytes is the randomness of a generated token (256 bits).
const tokenBytes = 32

// fileToken returns the token in the file at path, so that configured
// clients keep working across restarts; when the file holds none (it is
// missing, not a regular file of this user readable by this user only, or
// not a token), it writes a new random one there. The directory is made
// 0700 and must be a real directory of this user; the file is written
// 0600 under a fresh name (O_EXCL, O_NOFOLLOW) and renamed into place, so
// a symlink planted at path is replaced, never followed.
func fileToken(path string) (string, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !fi.IsDir() || !ok || int(st.Uid) != os.Getuid() {
		return "", fmt.Errorf("token file: %s is not a directory of this user", dir)
	}
	if fi.Mode().Perm() != 0o700 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return "", fmt.Errorf("token file: %w", err)
		}
	}
	if tok, ok := readToken(path); ok {
		return tok, nil
	}
	b := make([]byte, tokenBytes)
	rand.Read(b)
	tok := hex.EncodeToString(b)
	for {
		tmp := path + ".tmp-" + rand.Text()
		f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("token file: %w", err)
		}
		_, err = f.WriteString(tok + "\n")
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(tmp, path)
		}
		if err != nil {
			os.Remove(tmp)
			return "", fmt.Errorf("token file: %w", err)
		}
		return tok, nil
	}
}

// readToken reads a token that conch wrote at path: a regular file of
// this user, readable by this user only, opened without following a
// symlink or blocking on a FIFO.
func readToken(path string) (string, bool) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
		return "", false
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != os.Getuid() {
		return "", false
	}
	b := make([]byte, 2*tokenBytes+2)
	n, _ := io.ReadFull(f, b)
	tok := strings.TrimSuffix(string(b[:n]), "\n")
	if _, err := hex.DecodeString(tok); err != nil || len(tok) != 2*tokenBytes {
		return "", false
	}
	return tok, true
}
