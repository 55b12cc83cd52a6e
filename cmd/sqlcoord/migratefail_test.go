package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/migrate"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

// A migration that fails says which one and what to run next, without
// its SQL; the dirty schema then refuses up and down naming force; force
// accepts only the two versions the schema can be at.
func TestMigrationFailureNamesNextCommand(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		// migration 3 creates coord_idempotency IF NOT EXISTS, then
		// indexes its columns: a table of that name without them fails it
		if _, err := env.DB.ExecContext(ctx, "CREATE TABLE coord_idempotency (x int)"); err != nil {
			t.Fatal(err)
		}
		dsn := []string{"--dsn", env.DSN}
		_, err := runCLI(t, append([]string{"migrate", "up"}, dsn...)...)
		st, serr := sqlcoord.MigrationStatus(ctx, env.DB)
		if serr != nil || !st.Dirty {
			t.Fatalf("after the failure: %+v %v (migrate up: %v)", st, serr, err)
		}
		v, prev := st.Version, st.Version-1 // 3 on PostgreSQL, 7 on MariaDB (DDL commits as it goes)
		msg := err.Error()
		if !errors.Is(err, sqlcoord.ErrDirty) || !strings.Contains(msg, fmt.Sprintf("migration %d failed part-way", v)) ||
			!strings.Contains(msg, fmt.Sprintf("sqlcoord migrate force %d` if you completed", v)) || !strings.Contains(msg, fmt.Sprintf("sqlcoord migrate force %d` if you undid", prev)) ||
			strings.Contains(msg, "CREATE") || strings.Contains(msg, "ALTER") || strings.Count(msg, "sqlcoord: ") > 1 {
			t.Fatalf("failed migration: %v", err)
		}
		if exitCode(ctx, err) != exitUnhealthy {
			t.Errorf("exit %d, want %d", exitCode(ctx, err), exitUnhealthy)
		}
		for _, args := range [][]string{{"migrate", "up"}, {"migrate", "down", "--yes"}, {"migrate", "to", "5"}} {
			_, err := runCLI(t, append(args, dsn...)...)
			if !errors.Is(err, sqlcoord.ErrDirty) || !strings.Contains(err.Error(), fmt.Sprintf("migrate force %d", v)) || exitCode(ctx, err) != exitUnhealthy {
				t.Errorf("%v on a dirty schema: %v", args, err)
			}
		}
		out, _ := runCLI(t, append([]string{"migrate", "status"}, dsn...)...)
		if !strings.Contains(out, "DIRTY") || !strings.Contains(out, "migrate force --help") {
			t.Errorf("status of a dirty schema:\n%s", out)
		}
		for _, bad := range []uint{1, v + 1, 16} {
			_, err := runCLI(t, append([]string{"migrate", "force", fmt.Sprint(bad)}, dsn...)...)
			if !errors.Is(err, migrate.ErrForce) || exitCode(ctx, err) != exitUnhealthy {
				t.Errorf("force %d on a schema dirty at %d: %v", bad, v, err)
			}
		}
		// the repair: undo the failed migration, record the version
		// before it, take everything down and up again
		if _, err := env.DB.ExecContext(ctx, "DROP TABLE coord_idempotency"); err != nil {
			t.Fatal(err)
		}
		if out, err := runCLI(t, append([]string{"migrate", "force", fmt.Sprint(prev)}, dsn...)...); err != nil || !strings.Contains(out, fmt.Sprintf("schema version: %d of", prev)) {
			t.Fatalf("force %d: %v\n%s", prev, err, out)
		}
		if out, err := runCLI(t, append([]string{"migrate", "down", "--yes"}, dsn...)...); err != nil || !strings.Contains(out, fmt.Sprintf("reverted %d migration(s)", prev)) {
			t.Fatalf("down after the repair: %v\n%s", err, out)
		}
		if out, err := runCLI(t, append([]string{"migrate", "up"}, dsn...)...); err != nil || !strings.Contains(out, appliedAll()) {
			t.Fatalf("up after the repair: %v\n%s", err, out)
		}
	}, dbtest.NoMigrate())
}
