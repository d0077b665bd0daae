package tools

import (
	"bytes"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// argError is a tool call refused for its arguments; its text is what the
// model is told after "Error: ".
type argError struct{ Msg string }

func (e *argError) Error() string { return e.Msg }

func argErr(msg string) *argError { return &argError{Msg: msg} }

// rawArgs is a call's arguments as raw JSON values by key. Arguments that
// are not a JSON object read as an object with no keys.
type rawArgs map[string]json.RawMessage

func parseArgs(b json.RawMessage) rawArgs {
	var m rawArgs
	if err := json.Unmarshal(b, &m); err != nil {
		return rawArgs{}
	}
	return m
}

// present reports whether key was given a value other than null: a model
// that sends null for an optional argument means "not given".
func (a rawArgs) present(key string) bool {
	v, ok := a[key]
	return ok && !bytes.Equal(bytes.TrimSpace(v), []byte("null"))
}

// nonEmptyString reads a required string that must not be blank.
func (a rawArgs) nonEmptyString(key string) (string, bool) {
	var s string
	if !a.present(key) || json.Unmarshal(a[key], &s) != nil || strings.TrimSpace(s) == "" {
		return "", false
	}
	return s, true
}

// optString reads an optional string; ok is false for a value of another
// type.
func (a rawArgs) optString(key string) (s string, ok bool) {
	if !a.present(key) {
		return "", true
	}
	return s, json.Unmarshal(a[key], &s) == nil
}

// optBool reads an optional boolean.
func (a rawArgs) optBool(key string) (b, ok bool) {
	if !a.present(key) {
		return false, true
	}
	return b, json.Unmarshal(a[key], &b) == nil
}

// maxMillis keeps a huge timeout from overflowing a time.Duration; the
// executor clamps it to its own maximum anyway.
const maxMillis = 1e12

// optMillis reads an optional positive, finite number of milliseconds.
// ok is false for anything else; shown is the JSON value as given.
func (a rawArgs) optMillis(key string) (d time.Duration, given, ok bool, shown string) {
	if !a.present(key) {
		return 0, false, true, ""
	}
	raw := bytes.TrimSpace(a[key])
	shown = compact(raw)
	var n json.Number
	// A json.Number also accepts a string holding a number ("100"): a
	// model that quotes its number is told, not silently obeyed.
	if len(raw) == 0 || raw[0] == '"' || json.Unmarshal(raw, &n) != nil {
		return 0, true, false, shown
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f <= 0 {
		return 0, true, false, shown
	}
	f = min(f, maxMillis)
	d = time.Duration(f * float64(time.Millisecond))
	if d <= 0 { // below a nanosecond
		d = 1
	}
	return d, true, true, shown
}

func compact(raw []byte) string {
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return string(raw)
	}
	return buf.String()
}

// shownValue is how a value of key appears in a message: its JSON, or
// "undefined" when it is missing (the wording models know from
// JavaScript hosts).
func (a rawArgs) shownValue(key string) string {
	v, ok := a[key]
	if !ok {
		return "undefined"
	}
	return compact(bytes.TrimSpace(v))
}

// objectKeys returns the keys of a JSON object in the order they appear
// (a map would lose it), or nil when b is not a valid JSON object.
func objectKeys(b json.RawMessage) []string {
	if !json.Valid(b) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return keys
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return keys
		}
	}
	return keys
}

// lazyParams is schemaParams of schema, worked out once, at the first
// call.
func lazyParams(schema json.RawMessage) func() []string {
	return sync.OnceValue(func() []string { return schemaParams(schema) })
}

// schemaParams lists the properties of a JSON Schema object in the order
// the schema gives them.
func schemaParams(schema json.RawMessage) []string {
	var s struct {
		Properties json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(schema, &s); err != nil {
		panic("tools: bad input schema: " + err.Error())
	}
	return objectKeys(s.Properties)
}

// checkKeys refuses a call whose arguments hold a key the tool does not
// take: the first such key in the object's order is named, with the
// parameter it most likely meant, else the list of params. Keys in
// hidden are taken without being listed (a parameter this deployment
// disabled, which has its own message). Arguments that are not a JSON
// object are left to the tool's own checks. a is raw as parseArgs
// decoded it: raw is read again, for the keys' order, only when one is
// refused.
func checkKeys(tool string, raw json.RawMessage, a rawArgs, params []string, hidden ...string) error {
	known := func(k string) bool { return slices.Contains(params, k) || slices.Contains(hidden, k) }
	unknown := false
	for k := range a {
		if !known(k) {
			unknown = true
			break
		}
	}
	if !unknown {
		return nil
	}
	for _, k := range objectKeys(raw) {
		if known(k) {
			continue
		}
		msg := "invalid arguments: unknown parameter " + strconv.Quote(k)
		if p := closestParam(k, params); p != "" {
			return argErr(msg + " (did you mean " + strconv.Quote(p) + "?)")
		}
		if len(params) == 0 {
			return argErr(msg + "; " + tool + " takes no parameters")
		}
		return argErr(msg + "; " + tool + " takes " + strings.Join(params, ", "))
	}
	return nil
}

// closestParam is the parameter a misspelt key most likely meant: one
// equal to it ignoring case and underscores, else the nearest within edit
// distance 2 (the first in schema order on a tie), else "".
func closestParam(key string, params []string) string {
	fold := func(s string) string { return strings.ReplaceAll(strings.ToLower(s), "_", "") }
	for _, p := range params {
		if fold(p) == fold(key) {
			return p
		}
	}
	best, bestD := "", 3
	for _, p := range params {
		if d := editDistance(key, p); d < bestD {
			best, bestD = p, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in runes.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
