// Package hosttest drives the real AI hosts that run conch, Claude Code
// and Codex CLI, offline, to see what their model reads.
//
// A host is installed from npm at a pinned version (Install, once per
// machine, cached) and run against a scripted fake of its model's API
// served on 127.0.0.1: Anthropic's Messages API for Claude Code
// (NewAnthropic), OpenAI's Responses API for Codex (NewOpenAI). The fake
// model makes the tool calls its script gives, one a turn, and records
// every tool result the host sends back: exactly what a real model would
// read of conch's answer. Nothing leaves the machine: the hosts talk to the
// fake, and their updaters, telemetry and error reports are switched off
// (Claude.Env, Codex.Env).
//
// The tests of this package run `conch serve` under both hosts and check
// those results byte for byte (docs/transports.md, "Results").
package hosttest
