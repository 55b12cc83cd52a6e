package sqlcoord

import "testing"

// pgx's connect error after sslmode=prefer fell back to plain text: the
// refused TLS attempt is noise, the plain attempt holds the reason.
func TestQuietTLS(t *testing.T) {
	in := "failed to connect to `user=app database=app`:\n\t127.0.0.1:5433 (127.0.0.1): tls error: server refused TLS connection\n\t127.0.0.1:5433 (127.0.0.1): server error: FATAL: the database system is in recovery mode (SQLSTATE 57P03)"
	want := "failed to connect to `user=app database=app`: 127.0.0.1:5433 (127.0.0.1): server error: FATAL: the database system is in recovery mode (SQLSTATE 57P03)"
	if got := quietTLS(in); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	only := "failed to connect to `user=app database=app`: 127.0.0.1:5433 (127.0.0.1): tls error: server refused TLS connection"
	if got := quietTLS(only); got != only {
		t.Errorf("the only reason was dropped: %q", got)
	}
}

func TestPGPort(t *testing.T) {
	for dsn, want := range map[string]int{
		"postgres://u@h/db":                  5432,
		"postgres://u@h:6432/db":             6432,
		"postgres://u@h1:5432,h2:5433/db":    0,
		"host=h port=6432 dbname=db":         6432,
		"host=h dbname=db":                   5432,
		"host=h1,h2 port=5432,5433 dbname=x": 0,
	} {
		if got := pgPort(dsn); got != want {
			t.Errorf("pgPort(%q) = %d, want %d", dsn, got, want)
		}
	}
}
