// Package compat runs the previous release (RELEASES) against the schema
// this checkout ships: a rolling deploy runs both on one database, and a
// rollback leaves the previous release on the newer schema. It is a
// module of its own, outside go.work, so that it compiles the previous
// release's packages — its conformance suite among them — fetched from a
// local proxy built from the release's commit. scripts/compat-test.sh runs
// it (make test does); SQLCOORD_NEW_CLI names this checkout's CLI, which
// installs the current schema.
package compat_test

import (
	"context"
	"database/sql"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/internal/conformance"
	"github.com/sqlcoord/sqlcoord/internal/localdb"
	"github.com/sqlcoord/sqlcoord/migrate"
)

// cli runs this checkout's CLI and returns its exit status and output.
func cli(t *testing.T, args ...string) (int, string) {
	t.Helper()
	bin := os.Getenv("SQLCOORD_NEW_CLI")
	if bin == "" {
		t.Skip("SQLCOORD_NEW_CLI is not set: run scripts/compat-test.sh")
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "SQLCOORD_DSN=")
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), string(out)
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, string(out)
}

// The previous release passes its own conformance suite on a database
// this checkout migrated, on both dialects; and this checkout refuses the
// previous release's schema with the advice to migrate (exit 4), as
// docs/upgrading.md says (migrate first, then roll out).
func TestPreviousReleaseOnTheCurrentSchema(t *testing.T) {
	for _, fam := range []string{"postgres", "mysql"} {
		t.Run(fam, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			srv, err := localdb.Start(ctx, fam)
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Stop()

			t.Run("the current schema, the previous release's suite", func(t *testing.T) {
				dsn := currentSchema(ctx, t, srv, "compat_current")
				db, err := sqlcoord.Open(ctx, dsn, sqlcoord.Options{MaxOpenConns: 32, MaxIdleConns: 32})
				if err != nil {
					t.Fatal(err)
				}
				defer db.Close()
				other, err := sqlcoord.Open(ctx, dsn)
				if err != nil {
					t.Fatal(err)
				}
				defer other.Close()
				conformance.Test(t, conformance.Target[*sql.Tx]{Driver: db, Other: other, Tag: "previous", Workers: 4})
			})

			t.Run("the previous schema, refused by the current release", func(t *testing.T) {
				dsn, err := srv.CreateDatabase(ctx, "compat_previous")
				if err != nil {
					t.Fatal(err)
				}
				db, err := sqlcoord.Open(ctx, dsn)
				if err != nil {
					t.Fatal(err)
				}
				defer db.Close()
				if err := migrate.Migrate(ctx, db, migrate.Up); err != nil {
					t.Fatal(err)
				}
				code, out := cli(t, "doctor", "--dsn", dsn)
				if code != 4 || !strings.Contains(out, "migrate up") {
					t.Fatalf("the current release's doctor on the previous schema: exit %d, want 4 and the advice to migrate\n%s", code, out)
				}
				if code, out := cli(t, "migrate", "up", "--dsn", dsn); code != 0 {
					t.Fatalf("migrate up from the previous schema: exit %d\n%s", code, out)
				}
			})
		})
	}
}

// currentSchema creates database name on srv with the schema this
// checkout ships (its CLI's migrate up) and returns its DSN.
func currentSchema(ctx context.Context, t *testing.T, srv *localdb.Server, name string) string {
	t.Helper()
	dsn, err := srv.CreateDatabase(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if code, out := cli(t, "migrate", "up", "--dsn", dsn); code != 0 {
		t.Fatalf("the current release's migrate up: exit %d\n%s", code, out)
	}
	return dsn
}
