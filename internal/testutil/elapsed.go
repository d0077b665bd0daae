//go:build linux

package testutil

import "regexp"

// taskElapsed matches the run time in a task_list line (", 4.1s — ") or
// a completion notice (" after 1m12s. ").
var taskElapsed = regexp.MustCompile(`(, | after )(\d+\.\ds|\d+m\d+s|\d+h\d+m)( — |\. )`)

// NoElapsed replaces the run times in task lines and completion notices
// with "<T>", so that tests can compare texts whose timing varies.
func NoElapsed(s string) string { return taskElapsed.ReplaceAllString(s, "$1<T>$3") }
