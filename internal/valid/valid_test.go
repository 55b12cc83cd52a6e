package valid

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestText(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		s    string
		want error
	}{
		{"id-7", nil}, {"id-7 ", nil}, {"ключ", nil}, {strings.Repeat("a", 255), nil},
		{"", ErrEmpty}, {strings.Repeat("a", 256), ErrTooLong}, {"g\xff1", ErrNotUTF8},
		{"\x80", ErrNotUTF8}, {"a\x00b", ErrNUL}, {"\xed\xa0\x80", ErrNotUTF8}, // a UTF-16 surrogate
	} {
		err := Text("key", c.s, 255)
		if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("Text(%q) = %v, want %v", c.s, err, c.want)
		}
		if err != nil && !utf8.ValidString(err.Error()) {
			t.Errorf("message for %q is not UTF-8: %q", c.s, err.Error())
		}
	}
	if err := Optional("key", "", 10); err != nil {
		t.Error(err)
	}
	if q := Quote(strings.Repeat("é", 30)); !utf8.ValidString(q) {
		t.Errorf("Quote cut a rune: %q", q)
	}
}
