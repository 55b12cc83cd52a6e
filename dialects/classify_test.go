package dialects

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib"
)

// A statement that never left because no connection could be
// opened is ErrUnreachable, not a commit of unknown outcome.
func TestClassifyCommitConnectionRefused(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close() // nothing listens there now
	for _, c := range []struct {
		d      *Dialect
		driver string
		dsn    string
	}{
		{Postgres, "pgx", fmt.Sprintf("postgres://u@127.0.0.1:%d/db?connect_timeout=2", port)},
		{MariaDB, "mysql", fmt.Sprintf("u@tcp(127.0.0.1:%d)/db?timeout=2s", port)},
	} {
		t.Run(c.d.Name(), func(t *testing.T) {
			db, err := sql.Open(c.driver, c.dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err = db.ExecContext(ctx, "UPDATE t SET x = 1")
			if err == nil {
				t.Fatal("a statement with nothing listening succeeded")
			}
			got := c.d.ClassifyCommit(err)
			if !errors.Is(got, ErrUnreachable) || errors.Is(got, ErrCommitUnknown) {
				t.Errorf("ClassifyCommit(%v) = %v, want ErrUnreachable", err, got)
			}
		})
	}
}

// ErrorPosition reads PostgreSQL's error position through wrapping (what
// a failed migration's "line N" is computed from), and nothing from
// other errors.
func TestErrorPosition(t *testing.T) {
	err := fmt.Errorf("migration: %w", &pgconn.PgError{Code: "42601", Position: 17})
	if got := ErrorPosition(err); got != 17 {
		t.Errorf("wrapped PgError: position %d, want 17", got)
	}
	if got := ErrorPosition(errors.New("other")); got != 0 {
		t.Errorf("another error: position %d, want 0", got)
	}
}

// WithTopics narrows a claim by inserting its filter after the claim's
// WHERE: every claim statement of every dialect must have that WHERE, or
// a relay's topic filter would silently be ignored.
func TestWithTopicsNarrowsEveryClaim(t *testing.T) {
	for _, d := range []*Dialect{Postgres, MySQL, MariaDB} {
		for name, q := range map[string]string{"claim": d.q.OutboxClaim, "ordered": d.q.OutboxClaimOrdered,
			"claim, commit times": d.q.OutboxClaimCommitTS, "ordered, commit times": d.q.OutboxClaimOrderedCommitTS} {
			if q == "" {
				continue
			}
			got, args := d.WithTopics(q, []string{"a", "b"})
			if got == q || len(args(10)) != 3 {
				t.Errorf("%s %s: the topic filter was not applied:\n%s", d, name, got)
			}
		}
	}
}
