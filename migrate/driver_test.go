package migrate_test

import (
	"context"
	"strings"
	"testing"

	dt "github.com/golang-migrate/migrate/v4/database/testing"

	"github.com/sqlcoord/sqlcoord/migrate"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// TestDriverConformance runs golang-migrate's own driver suite (each
// driver of golang-migrate passes it) against the database/sql driver
// sqlcoord migrates with, on both dialects. Drop is left out: sqlcoord
// does not offer it (its tables live beside the application's).
func TestDriverConformance(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		d, err := migrate.DriverFor(context.Background(), env.DB)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		t.Run("NilVersion", func(t *testing.T) { dt.TestNilVersion(t, d) })
		t.Run("LockAndUnlock", func(t *testing.T) { dt.TestLockAndUnlock(t, d) })
		t.Run("Run", func(t *testing.T) {
			dt.TestRun(t, d, stringsReader("CREATE TABLE conformance_t (id int); INSERT INTO conformance_t VALUES (1);"))
		})
		t.Run("SetVersion", func(t *testing.T) { dt.TestSetVersion(t, d) })
	}, dbtest.NoMigrate())
}

func stringsReader(s string) *strings.Reader { return strings.NewReader(s) }
