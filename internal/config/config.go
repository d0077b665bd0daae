// Package config reads conch's configuration file.
//
// The file is TOML. Each setting is one key whose value is what the
// setting's command-line flag would take: `timeout_ms = 5000` is
// `--timeout-ms 5000`, a list (`pass = ["A", "B"]` under `[env]`) is the
// flag given once per element. The package only reads and positions the
// keys; the command that owns the flags checks their values, so a file and
// a flag are refused with the same words. Every error names the file, the
// line and the key.
package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2/unstable"
)

// MaxFileBytes bounds what Load reads: a configuration is a few lines, and
// a huge or endless file (a device, a FIFO) must not hang or bloat conch.
const MaxFileBytes = 1 << 20

// Entry is one key of a file.
type Entry struct {
	// Key is the dotted name: "timeout_ms", "env.pass".
	Key string
	// Values holds the value as flag arguments: one for a scalar, one per
	// element for an array (possibly none).
	Values []string
	// Array reports that the value was a TOML array.
	Array bool
	// File and Line say where the key was written (Line counts from 1).
	File string
	Line int
}

// Where is "<file>:<line>", for messages and `conch config`.
func (e Entry) Where() string { return fmt.Sprintf("%s:%d", e.File, e.Line) }

// Error is a problem with a configuration file. Key is "" for a syntax
// error that names no key.
type Error struct {
	File string
	Line int // 0 when the problem is the file as a whole
	Key  string
	Err  error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("config ")
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	if e.Key != "" {
		b.WriteString(": ")
		b.WriteString(e.Key)
	}
	b.WriteString(": ")
	b.WriteString(e.Err.Error())
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// DefaultPath is the user's configuration file:
// $XDG_CONFIG_HOME/conch/config.toml, else ~/.config/conch/config.toml. It
// is "" when neither can be found. A relative XDG_CONFIG_HOME is ignored,
// as the XDG specification says.
func DefaultPath() string {
	if x := os.Getenv("XDG_CONFIG_HOME"); filepath.IsAbs(x) {
		return filepath.Join(x, "conch", "config.toml")
	}
	home, err := os.UserHomeDir()
	if err != nil || !filepath.IsAbs(home) {
		return ""
	}
	return filepath.Join(home, ".config", "conch", "config.toml")
}

// ErrNotRegular is the cause of an Error for a path that is not a regular
// file.
var ErrNotRegular = errors.New("not a regular file")

// Load reads and parses the file at path. With optional, a file that does
// not exist is no error (Load returns no entries). Only a regular file is
// read, at most MaxFileBytes of it, without blocking on a FIFO.
func Load(path string, optional bool) ([]Entry, error) {
	data, err := readFile(path)
	if err != nil {
		if optional && errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, &Error{File: path, Err: err}
	}
	return Parse(path, data)
}

func readFile(path string) ([]byte, error) {
	f, err := openNonBlocking(path)
	if err != nil {
		return nil, unwrapPath(err)
	}
	defer f.Close()
	return readOpen(f)
}

// readOpen reads f, opened without blocking, if it is a regular file of
// at most MaxFileBytes.
func readOpen(f *os.File) ([]byte, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, unwrapPath(err)
	}
	if !fi.Mode().IsRegular() {
		return nil, ErrNotRegular
	}
	if fi.Size() > MaxFileBytes {
		return nil, fmt.Errorf("larger than %d bytes", MaxFileBytes)
	}
	buf := make([]byte, fi.Size()+1)
	n, err := readFull(f, buf)
	if err != nil {
		return nil, unwrapPath(err)
	}
	if n > int(fi.Size()) {
		return nil, errors.New("changed while being read")
	}
	return buf[:n], nil
}

func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Parse reads data (the contents of file) into entries, in file order.
// Tables name the prefix of the keys below them. Values must be strings,
// integers, floats, booleans or arrays of those; a key given twice and an
// inline table are errors. The one array of tables is [[mcp.clients]]:
// the keys of its n-th element (from 1) are named mcp.clients.<n>.<key>.
func Parse(file string, data []byte) ([]Entry, error) {
	var p unstable.Parser
	p.Reset(data)
	var (
		prefix  string
		entries []Entry
		seen    = map[string]int{}
		elems   = map[string]int{} // elements of each array of tables
	)
	for p.NextExpression() {
		e := p.Expression()
		keys := e.Key()
		var parts []string
		line := 0
		for keys.Next() {
			n := keys.Node()
			if line == 0 {
				line = p.Shape(n.Raw).Start.Line
			}
			parts = append(parts, string(n.Data))
		}
		name := strings.Join(parts, ".")
		switch e.Kind {
		case unstable.Table:
			prefix = name + "."
			continue
		case unstable.ArrayTable:
			if !arrayTables[name] {
				return nil, &Error{File: file, Line: line, Key: name, Err: errors.New("arrays of tables are not supported")}
			}
			elems[name]++
			prefix = name + "." + strconv.Itoa(elems[name]) + "."
			continue
		case unstable.KeyValue:
		default:
			continue
		}
		key := prefix + name
		if first, dup := seen[key]; dup {
			return nil, &Error{File: file, Line: line, Key: key, Err: fmt.Errorf("already set on line %d", first)}
		}
		seen[key] = line
		ent := Entry{Key: key, File: file, Line: line}
		v := e.Value()
		if v.Kind == unstable.Array {
			ent.Array = true
			ent.Values = []string{}
			elems := v.Children()
			for elems.Next() {
				s, err := scalar(elems.Node())
				if err != nil {
					return nil, &Error{File: file, Line: line, Key: key, Err: err}
				}
				ent.Values = append(ent.Values, s)
			}
		} else {
			s, err := scalar(v)
			if err != nil {
				return nil, &Error{File: file, Line: line, Key: key, Err: err}
			}
			ent.Values = []string{s}
		}
		entries = append(entries, ent)
	}
	if err := p.Error(); err != nil {
		line := 0
		var pe *unstable.ParserError
		if errors.As(err, &pe) {
			line = p.Shape(p.Range(pe.Highlight)).Start.Line
			err = errors.New(pe.Message)
		}
		return nil, &Error{File: file, Line: line, Err: err}
	}
	return entries, nil
}

// arrayTables are the keys that may be arrays of tables.
var arrayTables = map[string]bool{"mcp.clients": true}

// scalar is a TOML value as a flag argument.
func scalar(n *unstable.Node) (string, error) {
	switch n.Kind {
	case unstable.String:
		return string(n.Data), nil
	case unstable.Integer, unstable.Float:
		return strings.ReplaceAll(string(n.Data), "_", ""), nil
	case unstable.Bool:
		return string(n.Data), nil
	case unstable.Array:
		return "", errors.New("nested arrays are not supported")
	case unstable.InlineTable:
		return "", errors.New("inline tables are not supported")
	default:
		return "", fmt.Errorf("a %s value is not supported", strings.ToLower(n.Kind.String()))
	}
}
