package tools

import (
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/conch-dev/conch/shell"
)

// The cut of a stream that does not fit: its first bytes, a line saying
// what was left out and where the whole stream is, its last bytes.
const (
	// lineSnap is how far a cut moves to fall on a line boundary.
	lineSnap = 200
	// When both streams do not fit, stderr gets at most 1/stderrShare of
	// the room (more when stdout needs less): the command's own output
	// usually matters more, but an error must not be crowded out.
	stderrShare = 3
	// stderrHeader introduces stderr in a body; a newline may precede it.
	stderrHeader = "[stderr]\n"

	cutPrefix       = "[… "
	unavailablePfx  = "(unavailable: "
	reasonNotSaved  = "not saved to a file"
	reasonNoFile    = "the spill file could not be written"
	reasonCapPrefix = "over the "
)

// streamIn is one stream as the renderer gets it: the bytes a provider
// kept of it and the facts about the rest.
type streamIn struct {
	// head is the stream's first bytes when tail is not the whole of it;
	// "" when the start is not known (a read that fell behind).
	head string
	// tail is the stream's last bytes; the whole stream when whole.
	tail  string
	whole bool
	// size and lines count the stream's bytes and newlines, all of it.
	size, lines int64
	// where is the spill file holding the whole stream, or why there is
	// none: "(unavailable: <reason>)".
	where string
}

// outputStream is a foreground result's stream for the renderer.
func outputStream(o shell.Output) streamIn {
	if o.Binary {
		return binaryOutput(o)
	}
	if !o.Truncated {
		return wholeStream(o.Text, where(HostPath(o.Host, o.SpillPath), o.SpillErr, false))
	}
	if o.Size > 0 && int64(len(o.Head)) == o.Size { // the head holds all of it
		return wholeStream(o.Head, where(HostPath(o.Host, o.SpillPath), o.SpillErr, true))
	}
	return streamIn{head: o.Head, tail: o.Text, size: o.Size, lines: o.Lines,
		where: where(HostPath(o.Host, o.SpillPath), o.SpillErr, true)}
}

// readStream is one stream of an incremental read: the new text, and,
// when some of it was dropped from memory before this read, how much.
func readStream(text string, skipped shell.Omission, spill string, spillErr error) streamIn {
	if skipped.Bytes == 0 {
		return wholeStream(text, where(spill, spillErr, false))
	}
	return streamIn{tail: text, size: skipped.Bytes + int64(len(text)),
		lines: skipped.Lines + int64(strings.Count(text, "\n")), where: where(spill, spillErr, true)}
}

func wholeStream(text, where string) streamIn {
	return streamIn{tail: text, whole: true, size: int64(len(text)), lines: int64(strings.Count(text, "\n")), where: where}
}

// where names the file holding a whole stream, or says why there is none:
// it outgrew the spill cap, or could not be written (spilled: the stream
// outgrew the executor's memory, so a file was due), or the stream was
// short enough to be kept in memory only.
func where(path string, err error, spilled bool) string {
	if path != "" {
		return path
	}
	var capErr *shell.SpillCapError
	switch {
	case errors.As(err, &capErr):
		return unavailablePfx + reasonCapPrefix + humanBytes(capErr.Cap) + " spill cap)"
	case err != nil || spilled:
		return unavailablePfx + reasonNoFile + ")"
	}
	return unavailablePfx + reasonNotSaved + ")"
}

// humanBytes writes a size in binary units: "512 B", "64 MiB", and one
// decimal, rounded down, when the size is not a whole number of its unit
// ("1.5 KiB").
func humanBytes(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	u, scale := 0, int64(1)
	for u < len(units)-1 && n/scale >= 1024 {
		u, scale = u+1, scale*1024
	}
	whole, tenths := n/scale, n%scale*10/scale
	if tenths == 0 && n%scale == 0 {
		return strconv.FormatInt(whole, 10) + " " + units[u]
	}
	return strconv.FormatInt(whole, 10) + "." + strconv.FormatInt(tenths, 10) + " " + units[u]
}

// cutLine is the line that stands for what a cut left out.
func cutLine(bytes, lines int64, where string) string {
	return cutPrefix + strconv.FormatInt(bytes, 10) + " bytes (" + strconv.FormatInt(lines, 10) +
		" lines) omitted; full output: " + where + "]"
}

// shownStreams are both streams as a model sees them.
type shownStreams struct {
	out, err       string
	outCut, errCut bool // the text is not the whole stream
}

func (s shownStreams) body() string { return JoinStreams(s.out, s.err) }

// HostPath shows a spill path to a model: as is for this machine ("" host),
// as <host>:<path> for a remote host's file. An empty path stays empty.
func HostPath(host, path string) string {
	if host == "" || path == "" {
		return path
	}
	return host + ":" + path
}

// JoinStreams joins stdout and stderr the way conch shows them to a model:
// stdout, then, when stderr is non-empty, a newline if stdout is non-empty
// and does not end in one, then "[stderr]\n" and stderr.
func JoinStreams(stdout, stderr string) string {
	if stderr == "" {
		return stdout
	}
	sep := ""
	if stdout != "" && stdout[len(stdout)-1] != '\n' {
		sep = "\n"
	}
	return stdout + sep + "[stderr]\n" + stderr
}

// fitStreams renders stdout and stderr as the body of a text of at most
// budget bytes that ends with markers (see withMarkers; none for a read).
// When both streams fit whole they are shown whole. Otherwise stderr gets
// at most a third of the room and stdout the rest, either taking what the
// other does not need, and a stream longer than its share, or one whose
// provider kept only part of it, is cut.
func fitStreams(o, e streamIn, budget int, markers ...string) shownStreams {
	oc, ec := o.clean(), e.clean()
	if o.whole && e.whole {
		whole := shownStreams{out: oc, err: ec}
		n := len(whole.body())
		if len(markers) > 0 {
			n = len(withMarkers(whole.body(), markers...))
		}
		if n <= budget {
			return whole
		}
	}
	room := budget - markersLen(markers)
	if !e.whole || e.tail != "" {
		room -= len("\n") + len(stderrHeader)
	}
	needO, needE := o.need(oc), e.need(ec)
	shareE := room / stderrShare
	shareO := room - shareE
	switch {
	case needE < shareE:
		shareO, shareE = shareO+shareE-needE, needE
	case needO < shareO:
		shareO, shareE = needO, shareE+shareO-needO
	}
	var s shownStreams
	s.out, s.outCut = o.fit(oc, shareO)
	s.err, s.errCut = e.fit(ec, shareE)
	return s
}

// clean is a whole stream's text as shown when it fits; "" for a stream
// that will be cut anyway.
func (s streamIn) clean() string {
	if !s.whole {
		return ""
	}
	return cleanText(s.tail)
}

// need is how many bytes s takes when its share is unlimited: all of it
// when whole, else at most its head, the cut line and its tail, which
// never overlap.
func (s streamIn) need(clean string) int {
	if s.whole {
		return len(clean)
	}
	kept := int64(len(s.head) + len(s.tail))
	if s.size > 0 {
		kept = min(kept, s.size)
	}
	return int(kept) + len(s.maxCutLine()) + len("\n\n")
}

// maxCutLine is s's cut line at its longest: the counts can only shrink.
func (s streamIn) maxCutLine() string { return cutLine(s.size, s.lines, s.where) }

// fit renders s within share bytes: whole (clean) when it fits, else its
// first bytes (at most shell.HeadBytes or a tenth of the share), the cut
// line and its last bytes. Both cuts move to a line boundary when one is
// within lineSnap bytes, and never split a character. Only a share too
// small for the cut line itself gives more.
func (s streamIn) fit(clean string, share int) (text string, cut bool) {
	if s.whole && len(clean) <= share {
		return clean, false
	}
	src := s.head
	if s.whole {
		src = s.tail
	}
	headRaw := src[:headEnd(src, min(len(src), shell.HeadBytes, share/10), !s.whole)]
	head := cleanText(headRaw)
	sep := ""
	if head != "" && !strings.HasSuffix(head, "\n") {
		sep = "\n"
	}
	// The tail never reaches back into the head. (A provider that does
	// not count a stream, size 0, gets its tail shown all the same.)
	tsrc := s.tail
	if s.whole {
		tsrc = s.tail[len(headRaw):]
	} else if keep := s.size - int64(len(headRaw)); keep < int64(len(tsrc)) && s.size >= int64(len(tsrc)) {
		tsrc = tsrc[len(tsrc)-int(max(keep, 0)):]
	}
	room := share - len(head) - len(sep) - len(s.maxCutLine()) - len("\n")
	// Cleaning changes a tail's length: removed escapes leave room for
	// more of it, repaired UTF-8 asks for less. A few tries settle it.
	var tailRaw, tail string
	for want, tries := room, 0; want > 0 && tries < 8; tries++ {
		raw := tsrc[tailStart(tsrc, want, !s.whole):]
		c := cleanText(raw)
		if len(c) > room {
			want -= len(c) - room
			continue
		}
		if len(c) >= len(tail) {
			tailRaw, tail = raw, c
		}
		if len(c) > room-lineSnap || len(raw) == len(tsrc) {
			break
		}
		want += room - len(c)
	}
	omitted := max(s.size-int64(len(headRaw))-int64(len(tailRaw)), 0)
	lines := max(s.lines-int64(strings.Count(headRaw, "\n"))-int64(strings.Count(tailRaw, "\n")), 0)
	text = head + sep + cutLine(omitted, lines, s.where)
	if tail != "" {
		text += "\n" + tail
	}
	return text, true
}

// headEnd is where a head of at most n bytes of src ends: after the last
// newline within lineSnap bytes before n, else at n moved back to the
// start of a character. When src is only the start of the stream
// (midStream), its end is a cut too.
func headEnd(src string, n int, midStream bool) int {
	n = max(min(n, len(src)), 0)
	if n == 0 || src[n-1] == '\n' || (n == len(src) && !midStream) {
		return n
	}
	from := max(n-lineSnap, 0)
	if i := strings.LastIndexByte(src[from:n], '\n'); i >= 0 {
		return from + i + 1
	}
	for n > 0 && n < len(src) && !utf8.RuneStart(src[n]) {
		n--
	}
	return n
}

// tailStart is where a tail of at most n bytes of src starts: after the
// first newline within lineSnap bytes after the cut, else at the cut
// moved forward to the start of a character. When all of src fits and
// src itself starts where a provider cut the stream (midStream), that
// start is the cut, but its first line is kept when it is the only one.
func tailStart(src string, n int, midStream bool) int {
	p := len(src) - n
	switch {
	case p <= 0 && !midStream:
		return 0
	case p <= 0:
		p = 0
	case src[p-1] == '\n':
		return p
	}
	if i := strings.IndexByte(src[p:min(p+lineSnap, len(src))], '\n'); i >= 0 && p+i+1 < len(src) {
		return p + i + 1
	}
	for p < len(src) && !utf8.RuneStart(src[p]) {
		p++
	}
	return p
}
