package tools

import (
	"strconv"
	"strings"
	"time"

	"github.com/conch-dev/conch/shell"
)

// Markers of a foreground result.
const (
	noOutput         = "(no output)"
	exitMarkerPrefix = "[exit code: "
	sigMarkerPrefix  = "[killed by signal: "
	// leftRunningMarker tells a model that the rest of a command's output
	// is lost, and how to keep it next time.
	leftRunningMarker = "[a process started by this command is still running and holding its output; " +
		"its further output is discarded (use run_in_background to keep it)]"
)

// renderForeground is the model-facing text of a foreground result within
// budget bytes as JSON encodes it (encodedLen): the body (or "(no output)"), then the markers, each on
// its own line, the exit or signal marker last. Streams that do not fit
// are cut (see fitStreams). The structured value carries the same stream
// texts.
func renderForeground(r shell.Result, budget int) (string, ForegroundValue) {
	markers := append(cardMarkers(r), exitMarkers(r)...)
	o, e := outputStream(r.Stdout), outputStream(r.Stderr)
	shown := fitStreams(o, e, budget, markers...)
	v := foregroundValue(r, shown)
	return withMarkers(shown.body(), markers...), v
}

// exitMarkers is the signal or non-zero exit marker of r, if it has one.
func exitMarkers(r shell.Result) []string {
	switch {
	case r.Signal != "":
		return []string{sigMarkerPrefix + r.Signal + "]"}
	case r.ExitCode != nil && *r.ExitCode != 0:
		return []string{exitMarkerPrefix + strconv.Itoa(*r.ExitCode) + "]"}
	}
	return nil
}

func timedOutMarker(d time.Duration) string {
	return "[timed out after " + strconv.FormatInt(d.Milliseconds(), 10) + "ms]"
}

// markersLen is what markers add to a body at most, encoded
// (encodedLen): each on its own line.
func markersLen(markers []string) int {
	if len(markers) == 0 {
		return 0
	}
	return encodedLen("\n" + strings.Join(markers, "\n"))
}

// withMarkers puts markers after body, each on its own line; an empty body
// reads "(no output)". With no markers the body is returned verbatim.
func withMarkers(body string, markers ...string) string {
	if body == "" {
		body = noOutput
	}
	if len(markers) == 0 {
		return body
	}
	if !strings.HasSuffix(body, "\n") {
		body += "\n"
	}
	return body + strings.Join(markers, "\n")
}

// exitStatus is what parseExitStatus reads back from a result text.
type exitStatus struct {
	// ExitCode is the exit code the text reports (0 when it reports none
	// or a signal).
	ExitCode int
	// Signal is the signal the text reports, or "".
	Signal string
	// Output is the text without its final exit or signal marker.
	Output string
}

// parseExitStatus reads the exit status back from a foreground result
// text: a final "\n[killed by signal: SIG]" gives the signal, else a final
// "\n[exit code: N]" gives the code, else the exit was 0 and the text is
// returned unchanged. The leading newline is required, so an output that
// merely ends in marker-like text is not a failure. A clean exit whose
// last line is exactly a marker reads as that marker: replay sees only the
// text, and that residual is documented.
func parseExitStatus(text string) exitStatus {
	if rest, sig, ok := cutFinalMarker(text, sigMarkerPrefix); ok && sig != "" && !strings.ContainsAny(sig, "\n]") {
		return exitStatus{Signal: sig, Output: rest}
	}
	if rest, num, ok := cutFinalMarker(text, exitMarkerPrefix); ok {
		if n, err := strconv.Atoi(num); err == nil && num == strconv.Itoa(n) {
			return exitStatus{ExitCode: n, Output: rest}
		}
	}
	return exitStatus{Output: text}
}

// cutFinalMarker splits "<rest>\n<prefix><value>]" at the end of text.
func cutFinalMarker(text, prefix string) (rest, value string, ok bool) {
	if !strings.HasSuffix(text, "]") {
		return "", "", false
	}
	i := strings.LastIndex(text, "\n"+prefix)
	if i < 0 {
		return "", "", false
	}
	value = text[i+1+len(prefix) : len(text)-1]
	if strings.Contains(value, "\n") {
		return "", "", false
	}
	return text[:i], value, true
}
