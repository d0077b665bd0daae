package tools

import (
	"strconv"

	"github.com/conch-dev/conch/shell"
)

// binaryLine stands for a stream that is mostly not text
// (docs/tools.md#binary-output): its size and the file holding it, or
// why there is none, instead of bytes a model cannot use.
func binaryLine(size int64, where string) string {
	return "[binary output: " + strconv.FormatInt(size, 10) + " bytes; full output: " + where + "]"
}

// binaryOutput is the stream of a foreground result shown as its binary
// line.
func binaryOutput(o shell.Output) streamIn {
	line := binaryLine(o.Size, where(HostPath(o.Host, o.SpillPath), o.SpillErr, true))
	return wholeStream(line, line)
}

// binaryRead replaces, in a read of p, each binary stream that has new
// bytes with its binary line, sized as p's stream so far.
func binaryRead(r shell.ReadResult, p shell.Process) shell.ReadResult {
	if !r.StdoutBinary && !r.StderrBinary {
		return r
	}
	out, errOut := p.Written()
	if r.StdoutBinary && (r.Stdout != "" || r.StdoutSkipped.Bytes > 0) {
		r.Stdout = binaryLine(out, where(HostPath(r.Host, r.StdoutSpill), r.StdoutSpillErr, true)) + "\n"
		r.StdoutSkipped = shell.Omission{}
	}
	if r.StderrBinary && (r.Stderr != "" || r.StderrSkipped.Bytes > 0) {
		r.Stderr = binaryLine(errOut, where(HostPath(r.Host, r.StderrSpill), r.StderrSpillErr, true)) + "\n"
		r.StderrSkipped = shell.Omission{}
	}
	return r
}
