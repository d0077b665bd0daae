// Package cachelayer is the copy-on-write layer between a sandboxed
// session and the user's package and build caches: commands read the
// user's caches and write to conch's layer, never to the user's own
// directories, which the user's unsandboxed tools execute from
// (docs/sandbox.md#the-cache-layer).
//
// This file says which directories are caches and makes the missing ones
// (a mount needs a mount point); layer_linux.go keeps a session's writes
// and commits them to the layer all sessions share.
package cachelayer

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Dir is one of the user's cache directories.
type Dir struct {
	// Path is absolute.
	Path string
	// Tool is the program whose cache it is ("" for the XDG cache
	// directory, which every tool shares): Ensure makes a missing Path
	// only where Tool is installed, so that the home of a user who never
	// used cargo gains no ~/.cargo.
	Tool string
}

// Dirs are the user's cache directories for the environment getenv
// (os.Getenv, normally the server's), as each tool finds its own:
// $XDG_CACHE_HOME (~/.cache: Go's build cache, pip, uv, pre-commit…),
// npm's cache ($npm_config_cache, ~/.npm), Go's module cache and
// checksum database ($GOMODCACHE, else $GOPATH/pkg/mod; $GOPATH/pkg/sumdb;
// GOPATH and GOMODCACHE also from Go's own env file, without running
// go), $GOCACHE when it is elsewhere, Go's telemetry counters
// ($XDG_CONFIG_HOME/go/telemetry), cargo's registry and git checkouts
// ($CARGO_HOME, ~/.cargo), Maven's repository (~/.m2/repository),
// Gradle's caches ($GRADLE_USER_HOME, ~/.gradle), pnpm's store
// ($XDG_DATA_HOME/pnpm), bun's cache ($BUN_INSTALL_CACHE_DIR, ~/.bun) and
// Yarn Berry's global cache (~/.yarn/berry/cache). Relative values are
// ignored, as the tools ignore them; nil without a home.
func Dirs(getenv func(string) string) []Dir {
	home := getenv("HOME")
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	if !filepath.IsAbs(home) {
		return nil
	}
	env := func(key, def string) string {
		if v := getenv(key); filepath.IsAbs(v) {
			return v
		}
		return def
	}
	goenv := goEnvFile(getenv, home)
	gopath := env("GOPATH", "")
	if gopath == "" {
		gopath = goenv["GOPATH"]
	}
	if first, _, _ := strings.Cut(gopath, string(os.PathListSeparator)); filepath.IsAbs(first) {
		gopath = first
	} else {
		gopath = filepath.Join(home, "go")
	}
	modcache := env("GOMODCACHE", goenv["GOMODCACHE"])
	if !filepath.IsAbs(modcache) {
		modcache = filepath.Join(gopath, "pkg", "mod")
	}
	npm := env("npm_config_cache", env("NPM_CONFIG_CACHE", filepath.Join(home, ".npm")))
	cargo := env("CARGO_HOME", filepath.Join(home, ".cargo"))
	gradle := env("GRADLE_USER_HOME", filepath.Join(home, ".gradle"))
	data := env("XDG_DATA_HOME", filepath.Join(home, ".local", "share"))
	config := env("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	dirs := []Dir{
		{Path: env("XDG_CACHE_HOME", filepath.Join(home, ".cache"))},
		{Path: npm, Tool: "npm"},
		{Path: modcache, Tool: "go"},
		{Path: filepath.Join(gopath, "pkg", "sumdb"), Tool: "go"},
		{Path: env("GOCACHE", goenv["GOCACHE"]), Tool: "go"},
		// Go's telemetry counters: every go command writes them (local
		// only, unless the user opted in to uploading), and a denial
		// there would mark every go command.
		{Path: filepath.Join(config, "go", "telemetry"), Tool: "go"},
		{Path: filepath.Join(cargo, "registry"), Tool: "cargo"},
		{Path: filepath.Join(cargo, "git"), Tool: "cargo"},
		{Path: filepath.Join(home, ".m2", "repository"), Tool: "mvn"},
		{Path: filepath.Join(gradle, "caches"), Tool: "gradle"},
		{Path: filepath.Join(data, "pnpm"), Tool: "pnpm"},
		{Path: env("BUN_INSTALL_CACHE_DIR", filepath.Join(home, ".bun", "install", "cache")), Tool: "bun"},
		{Path: filepath.Join(home, ".yarn", "berry", "cache"), Tool: "yarn"},
	}
	var out []Dir
	for _, d := range dirs {
		if filepath.IsAbs(d.Path) {
			d.Path = filepath.Clean(d.Path)
			out = append(out, d)
		}
	}
	return out
}

// goEnvFile reads Go's env file (`go env -w` writes it:
// $GOENV, else os.UserConfigDir()/go/env), as go itself does.
func goEnvFile(getenv func(string) string, home string) map[string]string {
	path := getenv("GOENV")
	if path == "off" {
		return nil
	}
	if !filepath.IsAbs(path) {
		cfg := getenv("XDG_CONFIG_HOME")
		if !filepath.IsAbs(cfg) {
			cfg = filepath.Join(home, ".config")
		}
		path = filepath.Join(cfg, "go", "env")
	}
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	out := make(map[string]string)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), "="); ok {
			out[k] = v
		}
	}
	return out
}

// Ensure makes each missing directory of dirs (mode 0755; the XDG cache
// directory 0700) whose tool is found in PATH (lookPath; nil means
// exec.LookPath), or that has no tool, so that the layer has a mount
// point where the tool will write: npm makes ~/.npm on its first use, and
// a sandboxed npm could not. It returns the directories that exist.
func Ensure(dirs []Dir, lookPath func(string) (string, error)) []string {
	if lookPath == nil {
		lookPath = exec.LookPath
	}
	var out []string
	for _, d := range dirs {
		if fi, err := os.Stat(d.Path); err == nil {
			if fi.IsDir() {
				out = append(out, d.Path)
			}
			continue
		}
		if d.Tool != "" {
			if _, err := lookPath(d.Tool); err != nil {
				continue
			}
		}
		mode := os.FileMode(0o755)
		if d.Tool == "" {
			mode = 0o700
		}
		if os.MkdirAll(d.Path, mode) == nil {
			out = append(out, d.Path)
		}
	}
	return out
}
