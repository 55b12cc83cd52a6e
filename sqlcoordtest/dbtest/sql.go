package dbtest

import (
	"context"
	"fmt"
	"net/url"
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

// PasswordDSNs returns DSNs of env's database, in every form the family's
// driver accepts, that log in with password: PostgreSQL (trust auth here,
// so the password is sent and ignored) as URL userinfo, as a password=
// query parameter and as a libpq key=value string; MySQL/MariaDB as a user
// created with that password, in go-sql-driver form, behind mysql:// and as
// a URL.
func (e *Env) PasswordDSNs(t testing.TB, password string) map[string]string {
	t.Helper()
	s := e.Server
	if e.Family == "postgres" {
		return map[string]string{
			"url userinfo": fmt.Sprintf("postgres://postgres:%s@%s:%d/%s?sslmode=disable", url.QueryEscape(password), s.Host, s.Port, e.Name),
			"query param":  fmt.Sprintf("postgresql://postgres@%s:%d/%s?sslmode=disable&password=%s", s.Host, s.Port, e.Name, url.QueryEscape(password)),
			"key=value":    fmt.Sprintf("host=%s port=%d user=postgres password='%s' dbname=%s sslmode=disable", s.Host, s.Port, password, e.Name),
		}
	}
	user := "u_" + e.Name
	if len(user) > 32 {
		user = user[:32]
	}
	Exec(t, e.DB, fmt.Sprintf("CREATE USER IF NOT EXISTS '%s'@'%%' IDENTIFIED BY '%s'", user, password))
	Exec(t, e.DB, fmt.Sprintf("GRANT ALL ON `%s`.* TO '%s'@'%%'", e.Name, user))
	Exec(t, e.DB, "GRANT PROCESS, CONNECTION ADMIN ON *.* TO '"+user+"'@'%'")
	return map[string]string{
		"go-sql-driver": fmt.Sprintf("%s:%s@tcp(%s:%d)/%s", user, password, s.Host, s.Port, e.Name),
		"mysql:// form": fmt.Sprintf("mysql://%s:%s@tcp(%s:%d)/%s", user, password, s.Host, s.Port, e.Name),
		"url":           fmt.Sprintf("mysql://%s:%s@%s:%d/%s", user, url.QueryEscape(password), s.Host, s.Port, e.Name),
	}
}
