//go:build linux

package acp

// HelpText is helpText, for the external tests.
const HelpText = helpText
