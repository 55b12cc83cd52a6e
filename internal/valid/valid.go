// Package valid checks the strings that identify rows in the coord_ tables
// (lock, lease and fence names, idempotency scopes and keys, barrier gids,
// segment tags, job names, outbox topics and keys, inbox consumers and
// message ids) before they reach the database.
//
// Both dialects compare these columns byte for byte (PostgreSQL text under
// a deterministic collation; MySQL/MariaDB VARBINARY since migration 7), so
// "id-7" and "id-7 " are different keys everywhere. What the databases would
// treat inconsistently is refused up front instead: bytes that are not
// UTF-8 (MariaDB stored them as '?', PostgreSQL rejects them with an
// untyped 22021) and NUL (PostgreSQL cannot store it in text).
package valid

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Reasons a string is refused; Text's error wraps one of them.
var (
	ErrEmpty   = errors.New("empty")
	ErrTooLong = errors.New("too long")
	ErrNotUTF8 = errors.New("not valid UTF-8")
	ErrNUL     = errors.New("contains a NUL byte")
)

// Text returns nil when s is 1..maxBytes bytes of UTF-8 without NUL, and
// otherwise an error naming what (e.g. "lock name") and the reason. The
// string itself is quoted (shortened, with invalid bytes escaped) so that
// the message stays readable and valid UTF-8.
func Text(what, s string, maxBytes int) error {
	var why error
	switch {
	case s == "":
		why = ErrEmpty
	case len(s) > maxBytes:
		why = fmt.Errorf("%w: %d bytes, at most %d", ErrTooLong, len(s), maxBytes)
	case !utf8.ValidString(s):
		why = ErrNotUTF8
	case strings.IndexByte(s, 0) >= 0:
		why = ErrNUL
	default:
		return nil
	}
	return fmt.Errorf("%s %s: %w", what, Quote(s), why)
}

// Optional is Text that also accepts "".
func Optional(what, s string, maxBytes int) error {
	if s == "" {
		return nil
	}
	return Text(what, s, maxBytes)
}

// Quote returns s quoted for messages: at most 40 bytes, Go-escaped.
func Quote(s string) string {
	if len(s) > 40 {
		cut := 40
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		return fmt.Sprintf("%q…", s[:cut])
	}
	return fmt.Sprintf("%q", s)
}
