package term

// cursorScanner watches a program's output for cursor addressing: moves
// up or to a given row, and clearing the screen. A program that does any
// of these draws a screen rather than printing lines; moving within a line
// ("\r", left, right, erase in line) is what line editors and progress
// bars do, and does not count. It keeps its state across chunks.
type cursorScanner struct {
	state  uint8 // 0 plain, 1 after ESC, 2 in CSI
	params []byte
}

// scan reports whether b (continuing earlier chunks) addressed the cursor.
func (s *cursorScanner) scan(b []byte) bool {
	moved := false
	for _, c := range b {
		switch s.state {
		case 0:
			if c == 0x1b {
				s.state = 1
			}
		case 1:
			switch c {
			case '[':
				s.state, s.params = 2, s.params[:0]
			case 'M': // reverse index: up one line
				moved = true
				s.state = 0
			default:
				s.state = 0
			}
		case 2:
			switch {
			case c >= 0x30 && c <= 0x3f: // parameters
				if len(s.params) < 16 {
					s.params = append(s.params, c)
				}
			case c >= 0x20 && c <= 0x2f: // intermediates
			case c >= 0x40 && c <= 0x7e:
				switch c {
				case 'A', 'H', 'f', 'd', 'F':
					moved = true
				case 'J':
					if p := string(s.params); p == "2" || p == "3" {
						moved = true
					}
				}
				s.state = 0
			default:
				s.state = 0
			}
		}
	}
	return moved
}
