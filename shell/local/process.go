package local

import (
	"github.com/conch-dev/conch/internal/capture"
	"github.com/conch-dev/conch/shell"
)

func readStreams(stdout, stderr *capture.Stream) shell.ReadResult {
	var r shell.ReadResult
	var lossyOut, lossyErr bool
	r.Stdout, lossyOut = stdout.Next()
	r.Stderr, lossyErr = stderr.Next()
	if lossyOut || lossyErr {
		r.Lossy = true
		r.StdoutSpill = stdout.SpillPath()
		r.StderrSpill = stderr.SpillPath()
	}
	return r
}
