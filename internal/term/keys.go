package term

import (
	"fmt"
	"strconv"

	"github.com/charmbracelet/x/vt"
)

// KeyNames lists the key names ParseKeys knows, for messages.
const KeyNames = "Enter, Tab, Escape, Backspace, Up, Down, Left, Right, Home, End, PageUp, PageDown, C-a … C-z, F1 … F12"

// UnknownKeyError is a key name ParseKeys does not know.
type UnknownKeyError struct{ Key string }

func (e *UnknownKeyError) Error() string {
	return fmt.Sprintf("unknown key %q; keys are %s", e.Key, KeyNames)
}

var namedKeys = map[string]rune{
	"Enter": vt.KeyEnter, "Tab": vt.KeyTab, "Escape": vt.KeyEscape, "Backspace": vt.KeyBackspace,
	"Up": vt.KeyUp, "Down": vt.KeyDown, "Left": vt.KeyLeft, "Right": vt.KeyRight,
	"Home": vt.KeyHome, "End": vt.KeyEnd, "PageUp": vt.KeyPgUp, "PageDown": vt.KeyPgDown,
}

func init() {
	for i := 1; i <= 12; i++ {
		namedKeys["F"+strconv.Itoa(i)] = vt.KeyF1 + rune(i-1)
	}
}

// ParseKeys turns key names (Enter, Tab, Escape, Backspace, Up, Down,
// Left, Right, Home, End, PageUp, PageDown, C-a … C-z, F1 … F12; case
// matters) into key presses, or fails with an *UnknownKeyError naming the
// first it does not know.
func ParseKeys(names []string) ([]vt.KeyPressEvent, error) {
	keys := make([]vt.KeyPressEvent, 0, len(names))
	for _, n := range names {
		if code, ok := namedKeys[n]; ok {
			keys = append(keys, vt.KeyPressEvent{Code: code})
			continue
		}
		if len(n) == 3 && n[:2] == "C-" && n[2] >= 'a' && n[2] <= 'z' {
			keys = append(keys, vt.KeyPressEvent{Code: rune(n[2]), Mod: vt.ModCtrl})
			continue
		}
		return nil, &UnknownKeyError{Key: n}
	}
	return keys, nil
}
