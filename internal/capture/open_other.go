//go:build !unix

package capture

// Without O_NOFOLLOW, O_EXCL alone refuses an existing name, links
// included.
const oNoFollow = 0

func isLoop(error) bool { return false }
