package audit

// SetBeforeNextOpen sets the hook openNext runs between its look at the
// log's files and its open; it must be set before any Follow starts, and
// unset after.
func SetBeforeNextOpen(f func()) { beforeNextOpen = f }
