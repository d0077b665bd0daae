package capture

import (
	"testing"
)

// partialTail must agree with the set of all proper prefixes of valid
// encodings, over every 1- and 2-byte string and every 3-byte string
// built from the bytes where UTF-8's rules change.
// (The property and fuzz tests cover the rest at random.)
func TestPartialTailMatchesEveryPrefix(t *testing.T) {
	check := func(b []byte) {
		t.Helper()
		if got, want := partialTail(b), modelPartial(b); got != want {
			t.Fatalf("partialTail(% x) = %d, want %d", b, got, want)
		}
	}
	check(nil)
	edges := []byte{0x00, 0x41, 0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xc0, 0xc1, 0xc2, 0xdf, 0xe0, 0xe1, 0xec, 0xed, 0xee, 0xef, 0xf0, 0xf1, 0xf3, 0xf4, 0xf5, 0xf8, 0xff}
	for a := range 256 {
		check([]byte{byte(a)})
		for b := range 256 {
			check([]byte{byte(a), byte(b)})
		}
	}
	for _, a := range edges {
		for _, b := range edges {
			for _, c := range edges {
				check([]byte{a, b, c})
				check([]byte{'x', a, b, c})
			}
		}
	}
	check([]byte("abc\xf0\x9f\x98"))
	check([]byte("abc\xf0\x9f\x98\x80"))
}
