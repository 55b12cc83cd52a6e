package dbtest

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/sqlcoord/sqlcoord"
)

// Exec runs a statement for a test and fails it on error.
func Exec(t testing.TB, db *sqlcoord.DB, q string, args ...any) {
	t.Helper()
	if _, err := db.ExecContext(context.Background(), q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// Count runs a single-integer query (count(*) …) for a test.
func Count(t testing.TB, db *sqlcoord.DB, q string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRowContext(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// HelperDB opens the database named by the DSN environment variable that
// Spawn's callers pass to helper processes.
func HelperDB(ctx context.Context, maxConns int) (*sqlcoord.DB, error) {
	db, err := sqlcoord.Open(ctx, os.Getenv("DSN"), sqlcoord.Options{MaxOpenConns: maxConns, MaxIdleConns: maxConns})
	if err != nil {
		return nil, fmt.Errorf("helper: %w", err)
	}
	return db, nil
}
