//go:build linux

package tools

import (
	"encoding/json"

	"github.com/conch-dev/conch/shell"
)

// Internals the external tests reach.
var (
	CleanText         = cleanText
	HumanBytes        = humanBytes
	NewProcessHandle  = newProcessHandle
	RenderRead        = renderRead
	TaskLine          = taskLine
	Elapsed           = elapsed
	OneLineLabel      = oneLineLabel
	ParseExitStatus   = parseExitStatus
	NewTerminalHandle = newTerminalHandle
	DeniedBySandbox   = deniedBySandbox
	EncodedLen        = encodedLen
	EncodedPrefix     = encodedPrefix
	EncodedSuffix     = encodedSuffix
)

// Internal types the external tests name.
type (
	BashArgs      = bashArgs
	ArgError      = argError
	ProcessHandle = processHandle
	ExitStatus    = exitStatus
)

// KindBash is the task kind of a background bash command.
const KindBash = kindBash

// RenderForeground is the text of renderForeground.
func RenderForeground(r shell.Result, budget int) string {
	text, _ := renderForeground(r, budget)
	return text
}

// RenderForegroundValue is renderForeground, text and structured value.
func RenderForegroundValue(r shell.Result, budget int) (string, ForegroundValue) {
	return renderForeground(r, budget)
}

// Request is t.request.
func (t *Toolset) Request(sess Session, b bashArgs) shell.Request { return t.request(sess, b) }

// Deliver is t.deliver.
func (t *Toolset) Deliver(session string, r Result, render func(int) Result, notices []Notice) Result {
	return t.deliver(session, r, render, notices)
}

// ParseBashArgs decodes and validates bash arguments as a call does, for
// a deployment whose only parameters are the bash schema's
// (backgroundAllowed false: run_in_background disabled).
func ParseBashArgs(raw json.RawMessage, backgroundAllowed bool) (BashArgs, error) {
	a := parseArgs(raw)
	params, hidden := bashParams(), []string(nil)
	if !backgroundAllowed {
		params, hidden = bashParamsNoBackground(), []string{paramBackground}
	}
	if err := checkKeys(NameBash, raw, a, params, hidden...); err != nil {
		return BashArgs{}, err
	}
	return readBashArgs(a, backgroundAllowed)
}
