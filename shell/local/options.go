package local

import (
	"github.com/conch-dev/conch/ops"

	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/conch-dev/conch/internal/capture"
)

// Defaults (docs/executor.md#defaults).
const (
	DefaultTimeout        = 120 * time.Second
	DefaultMaxTimeout     = 600 * time.Second
	DefaultMaxOutputBytes = 64000
	DefaultMaxSpillBytes  = 64 << 20
	DefaultGrace          = 3 * time.Second
	DefaultSpillBudget    = 1 << 30
)

// Options configure an Executor. A zero field means its default; a
// negative one is refused by New with an error naming the field.
type Options struct {
	// Cwd is the default working directory (default: the server's).
	Cwd string
	// Recorder, if set, receives an ops.Init for each session init a
	// contained executor (shell/contained) starts; this package itself
	// records nothing (the tools record calls and processes).
	Recorder ops.Recorder
	// Timeout is the default foreground timeout (default 120 s).
	Timeout time.Duration
	// MaxTimeout caps every foreground timeout (default 600 s).
	MaxTimeout time.Duration
	// MaxOutputBytes is the in-memory tail kept per stream (default 64000).
	MaxOutputBytes int
	// MaxSpillBytes caps each stream's spill file (default 64 MiB).
	MaxSpillBytes int64
	// Grace is the delay between SIGTERM and SIGKILL, and the bound on
	// draining pipes after the shell exits (default 3 s).
	Grace time.Duration
	// SpillBudget bounds the total size of all spill files (default 1 GiB).
	SpillBudget int64
	// SpillParent is where the private spill directory is created
	// (default: the user's spill root, conch-<uid> in os.TempDir(), which
	// every conch server of the user shares: see Executor.SpillRoot).
	SpillParent string
	// Environ is the environment commands inherit before the scrub
	// (default os.Environ() at New).
	Environ []string
	// PassEnv names variables of Environ that commands inherit although
	// the scrub would drop them (a credential the user wants commands to
	// have). It is the user's choice, never the model's: conch's
	// --pass-env flags arrive here.
	PassEnv []string
	// Shell is the bash binary (default: "bash" looked up in PATH).
	Shell string
	// Spawner starts each command's shell (see Spawner); nil means each
	// shell is a direct child of this process, which New then makes a
	// child subreaper.
	Spawner Spawner
	// Wrap, when set, may change each command of the default spawner
	// before it starts: its Path and Args, to run the shell under a
	// wrapper (env, a sandboxing tool) that ends by executing the
	// original Path and Args; its SysProcAttr, keeping Setsid and
	// Pdeathsig. Nothing may be added to the command's files. Ignored
	// when Spawner is set.
	Wrap func(*exec.Cmd)
	// Warm starts the next foreground command's bash ahead, once a
	// foreground command has ended with nothing else of the executor's
	// running, and runs that command in it when it fits: it then pays
	// none of bash's start (docs/executor.md#warm-shells).
	Warm bool
}

// ConfigError is a setting New refused.
type ConfigError struct {
	Field  string
	Reason string
}

func (e *ConfigError) Error() string { return e.Field + " " + e.Reason }

func positive(field string) error {
	return &ConfigError{Field: field, Reason: "must be a positive finite number"}
}

// resolve checks o and fills its defaults.
func (o Options) resolve() (Options, error) {
	durations := []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"Timeout", &o.Timeout, DefaultTimeout},
		{"MaxTimeout", &o.MaxTimeout, DefaultMaxTimeout},
		{"Grace", &o.Grace, DefaultGrace},
	}
	for _, d := range durations {
		switch {
		case *d.v < 0:
			return o, positive(d.name)
		case *d.v == 0:
			*d.v = d.def
		}
	}
	sizes := []struct {
		name string
		v    *int64
		def  int64
	}{
		{"MaxSpillBytes", &o.MaxSpillBytes, DefaultMaxSpillBytes},
		{"SpillBudget", &o.SpillBudget, DefaultSpillBudget},
	}
	for _, s := range sizes {
		switch {
		case *s.v < 0:
			return o, positive(s.name)
		case *s.v == 0:
			*s.v = s.def
		}
	}
	switch {
	case o.MaxOutputBytes < 0:
		return o, positive("MaxOutputBytes")
	case o.MaxOutputBytes == 0:
		o.MaxOutputBytes = DefaultMaxOutputBytes
	case o.MaxOutputBytes > capture.MaxTail:
		return o, &ConfigError{Field: "MaxOutputBytes", Reason: fmt.Sprintf("must be at most %d", capture.MaxTail)}
	}
	if o.Cwd == "" {
		wd, err := os.Getwd()
		if err != nil {
			return o, &ConfigError{Field: "Cwd", Reason: fmt.Sprintf("cannot be determined: %v", err)}
		}
		o.Cwd = wd
	}
	cwd, err := filepath.Abs(o.Cwd)
	if err != nil {
		return o, &ConfigError{Field: "Cwd", Reason: err.Error()}
	}
	o.Cwd = cwd
	if o.Environ == nil {
		o.Environ = os.Environ()
	}
	if o.Shell == "" {
		o.Shell = "bash"
	}
	if filepath.Base(o.Shell) == o.Shell {
		p, err := exec.LookPath(o.Shell)
		if err != nil {
			return o, &ConfigError{Field: "Shell", Reason: err.Error()}
		}
		o.Shell = p
	}
	return o, nil
}
