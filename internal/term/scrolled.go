package term

import "fmt"

// ScrolledAway is the line that starts a Read when n lines scrolled away
// before it, unread: "[… <n> lines scrolled away]", which ends with
// ScrolledSuffix.
func ScrolledAway(n int64) string { return fmt.Sprintf("[… %d", n) + ScrolledSuffix }

// ScrolledSuffix ends the line ScrolledAway makes.
const ScrolledSuffix = " lines scrolled away]"
