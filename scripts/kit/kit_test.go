// Package kit_test is a module outside sqlcoord's repository, as a user's
// would be: it runs the conformance suite (sqlcoordtest) on the
// throwaway servers of the test kit, through a dialect written here
// against the exported contract (dialects.Operations, Derive, Register).
// scripts/install-test.sh copies it into an empty module and runs it
// against this checkout published as a release.
package kit_test

import (
	"context"
	"database/sql"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/dialects"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// counting is a dialect of its own: a built-in one's operations, with
// lease acquisitions counted.
type counting struct {
	dialects.Operations
	acquires atomic.Int64
}

func (c *counting) LeaseAcquire(ctx context.Context, pool dialects.Executor, l dialects.LeaseSlot) (dialects.LeaseRow, error) {
	c.acquires.Add(1)
	return c.Operations.LeaseAcquire(ctx, pool, l)
}

func TestConformanceOutsideTheRepository(t *testing.T) {
	for _, base := range []*dialects.Dialect{dialects.Postgres, dialects.MariaDB} {
		t.Run(base.Name(), func(t *testing.T) {
			ops := &counting{Operations: base.Operations()}
			name := "counting-" + base.Name()
			if err := dialects.Register(dialects.Derive(base, name, ops)); err != nil {
				t.Fatal(err)
			}
			env := dbtest.New(t, base.Family())
			raw, err := sql.Open(base.DriverName(), env.DSN)
			if err != nil {
				t.Fatal(err)
			}
			defer raw.Close()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			db, err := sqlcoord.WrapDB(ctx, raw, sqlcoord.Options{Dialect: name})
			if err != nil {
				t.Fatal(err)
			}
			if db.Dialect().Name() != name {
				t.Fatalf("the pool runs dialect %s, want %s", db.Dialect().Name(), name)
			}
			sqlcoordtest.Run(t, sqlcoordtest.Target[*sql.Tx]{Driver: db, Other: env.DB, Tag: "kit", Workers: 4})
			if ops.acquires.Load() == 0 {
				t.Fatal("the suite never went through the dialect written outside the repository")
			}
		})
	}
}
