package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"

	cfgfile "github.com/conch-dev/conch/internal/config"
)

// The subcommands run, serve and acp share one harness: the same setting
// flags, read from the configuration file first (docs/configuration.md),
// --help on stdout, a usage error on stderr naming the flag with exit
// status 2, the same stop signals (see main), and the same start-up log
// line.

// providers are the names --provider takes (the provider key): auto,
// the default, is contained where the host allows an init and local
// where it does not, as --containment says; local and contained each
// stand for a containment mode (providerContainment).
var providers = []string{"auto", "local", "contained"}

// providerContainment is the --containment mode each provider but auto
// is: local runs commands without an init, contained refuses to start
// without one.
var providerContainment = map[string]string{"local": "off", "contained": "require"}

// applyProvider folds --provider into --containment, which builds the
// executor (config.executor). An explicit --containment of another mode
// than the provider's is a contradiction, refused naming both flags;
// --containment auto leaves the choice to the provider. It may be called
// more than once.
func (c *config) applyProvider() error {
	mode, ok := providerContainment[c.provider.v]
	if !ok {
		return nil // auto, or a subcommand without the flag (conch agent)
	}
	if c.containment.given && c.containment.v != mode && c.containment.v != "auto" {
		return fmt.Errorf("--provider %s contradicts --containment %s (--provider %s is --containment %s)", c.provider.v, c.containment.v, c.provider.v, mode)
	}
	c.containment.v, c.containment.given = mode, true
	return nil
}

// choice is a flag value that must be one of a fixed set.
type choice struct {
	v    string
	from []string
	// given: the value came from a flag or the configuration file, not
	// the default (an explicit sandbox must hold; the default degrades).
	given bool
}

func (c *choice) String() string {
	if c == nil {
		return ""
	}
	return c.v
}

func (c *choice) Set(s string) error {
	if !slices.Contains(c.from, s) {
		return fmt.Errorf("must be one of: %s", strings.Join(c.from, ", "))
	}
	c.v, c.given = s, true
	return nil
}

// logLevel is the --log-level flag.
type logLevel struct{ slog.Level }

func (l *logLevel) String() string {
	if l == nil {
		return ""
	}
	return strings.ToLower(l.Level.String())
}

func (l *logLevel) Set(s string) error {
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return errors.New("must be debug, info, warn or error")
	}
	return nil
}

// subcommandKeys are the configuration keys of flags only some
// subcommands have; a file holding them is valid for all.
var subcommandKeys = []string{"http", "token"}

// knownKey reports whether key names a setting of any subcommand.
func knownKey(key string) bool {
	if slices.Contains(subcommandKeys, key) || strings.HasPrefix(key, "rules.") { // rules: see cfgfile.Rules
		return true
	}
	fs := flag.NewFlagSet("", flag.ContinueOnError)
	var c config
	c.addFlags(fs, 0, slog.LevelInfo)
	found := false
	fs.VisitAll(func(f *flag.Flag) { found = found || configKey(f.Name) == key })
	return found
}

// parseFlags parses a subcommand's settings: the configuration file
// (--config FILE, else the default file if it exists), then the flags of
// args over it. --help prints usage (then the flags) to stdout; a bad flag
// or a bad file is reported on stderr, naming the flag or the file, line
// and key, with exit status 2. ok is false when the caller should return
// code.
func parseFlags(fs *flag.FlagSet, args []string, usage string, stdout, stderr io.Writer) (s *settings, code int, ok bool) {
	fs.SetOutput(stderr)
	fs.Usage = func() {}
	if fs.Lookup("config") == nil {
		fs.String("config", "", "read settings from `FILE` (default $XDG_CONFIG_HOME/conch/config.toml, if it exists); flags override it")
	}
	s, err := loadSettings(fs, args, knownKey)
	var cerr *cfgfile.Error
	switch {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(stdout, usage)
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		return nil, 0, false
	case errors.As(err, &cerr):
		fmt.Fprintf(stderr, "%s: %v\n", fs.Name(), err)
		return nil, 2, false
	case err != nil:
		fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", fs.Name())
		return nil, 2, false
	}
	return s, 0, true
}

// newLogger is the logger of a subcommand: text to stderr (stdout belongs
// to the protocol or the command's output) at c's level.
func (c *config) newLogger(stderr io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: c.logLevel.Level}))
}

// logStart writes the start-up line every subcommand writes: the version,
// the provider, what it enforces, and the configuration file read.
func (st *stack) logStart(log *slog.Logger, name string, s *settings) {
	file := s.file
	if file == "" {
		file = "none"
	}
	log.Info("conch "+name, "version", version, "provider", st.provider, "enforces", st.enforces, "config", file)
}
