// Package errs formats sqlcoord's wrapped errors so that each says its
// context once: "txn: key orders/a: idempotency key reused with a
// different request", not "txn: txn: key orders/a: txn: idempotency key
// reused …". Every package names itself at the front of what it adds;
// Errorf drops the package names that inner errors repeat after it.
package errs

import (
	"fmt"
	"strings"
)

// packages are the prefixes sqlcoord's packages put on their errors.
var packages = []string{"sqlcoord", "coord", "txn", "ids", "jobs", "outbox", "saga", "session", "membership", "console", "keepalive", "migrate", "pgxv5", "sqlxdriver"}

// Errorf is fmt.Errorf (errors.Is and errors.As see every %w operand)
// whose message keeps only the first package prefix.
func Errorf(format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	return &wrapped{msg: Once(err.Error()), err: err}
}

type wrapped struct {
	msg string
	err error
}

func (w *wrapped) Error() string { return w.msg }

// Unwrap returns the fmt.Errorf error, which unwraps to the operands.
func (w *wrapped) Unwrap() error { return w.err }

// Once removes every "pkg: " that follows a ": " or "; " separator (the
// front of an inner error's text) and every exact repetition of the
// segment just before it ("x: x" → "x").
func Once(msg string) string {
	parts := strings.Split(msg, ": ")
	out := parts[:1]
	for _, p := range parts[1:] {
		if isPackage(p) {
			continue // "pkg" followed by ": " — an inner prefix
		}
		if len(out) > 0 && p == out[len(out)-1] {
			continue
		}
		out = append(out, p)
	}
	return strings.Join(out, ": ")
}

func isPackage(s string) bool {
	for _, p := range packages {
		if s == p {
			return true
		}
	}
	return false
}
