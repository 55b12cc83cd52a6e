package errs

import (
	"errors"
	"testing"
)

func TestOnce(t *testing.T) {
	for in, want := range map[string]string{
		"txn: txn: key orders/req-A: txn: idempotency key reused with a different request": "txn: key orders/req-A: idempotency key reused with a different request",
		`coord: lock "a": sqlcoord: locked by another transaction`:                         `coord: lock "a": locked by another transaction`,
		"sqlcoord: bad DSN: empty":                          "sqlcoord: bad DSN: empty",
		"outbox: publish: 400 Bad Request: 400 Bad Request": "outbox: publish: 400 Bad Request",
		"plain": "plain",
	} {
		if got := Once(in); got != want {
			t.Errorf("Once(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestErrorfUnwraps(t *testing.T) {
	a, b := errors.New("sqlcoord: a"), errors.New("b")
	err := Errorf("coord: x: %w: %w", a, b)
	if !errors.Is(err, a) || !errors.Is(err, b) {
		t.Fatalf("%v does not unwrap to both operands", err)
	}
	if err.Error() != "coord: x: a: b" {
		t.Fatalf("got %q", err.Error())
	}
}
