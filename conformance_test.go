package sqlcoord_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord/pgxv5"
	"github.com/sqlcoord/sqlcoord/sqlxdriver"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jmoiron/sqlx"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/coord"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
	"github.com/sqlcoord/sqlcoord/txn"
)

// runStacks runs the conformance suite on each way an application
// reaches sqlcoord on dsn, with pools of at most conns connections:
// sqlcoord.Open, its own *sql.DB and *sqlx.DB (with the driver's default
// settings, not the ones Open forces) and a pgx-native pool.
// With pooler, each stack is told it is behind a transaction-mode pooler
// by the Pooler option (Open, WrapDB, sqlxdriver.Wrap, pgxv5.Wrap), its own
// statement mode left at pgx's default (cached prepared statements).
func runStacks(t *testing.T, env *dbtest.Env, dsn string, conns, workers int, prefix string, pooler bool, behind ...bool) {
	viaPooler := len(behind) > 0 && behind[0]
	ctx := context.Background()
	wo := sqlcoord.Options{Pooler: pooler}
	driverName, appDSN := "pgx", dsn
	if env.Family == "mysql" {
		// an application's own DSN: parseTime, but no clientFoundRows
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil {
			t.Fatal(err)
		}
		cfg.ClientFoundRows = false
		driverName, appDSN = "mysql", cfg.FormatDSN()
	}
	tag := func(s string) string { return fmt.Sprintf("%s%s", prefix, s) }
	t.Run("sqlcoord.Open", func(t *testing.T) {
		db, err := sqlcoord.Open(ctx, dsn, sqlcoord.Options{MaxOpenConns: conns, Pooler: pooler})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		sqlcoordtest.Run(t, sqlcoordtest.Target[*sql.Tx]{Driver: db, Other: env.DB, Tag: tag("open"), Workers: workers, Pooler: viaPooler})
	})
	t.Run("database/sql", func(t *testing.T) {
		raw, err := sql.Open(driverName, appDSN)
		if err != nil {
			t.Fatal(err)
		}
		defer raw.Close()
		raw.SetMaxOpenConns(conns)
		db, err := sqlcoord.WrapDB(ctx, raw, wo)
		if err != nil {
			t.Fatal(err)
		}
		sqlcoordtest.Run(t, sqlcoordtest.Target[*sql.Tx]{Driver: db, Other: env.DB, Tag: tag("sqldb"), Workers: workers, Pooler: viaPooler})
	})
	t.Run("sqlx", func(t *testing.T) {
		x, err := sqlx.Open(driverName, appDSN)
		if err != nil {
			t.Fatal(err)
		}
		defer x.Close()
		x.SetMaxOpenConns(conns)
		d, err := sqlxdriver.Wrap(ctx, x, wo)
		if err != nil {
			t.Fatal(err)
		}
		sqlcoordtest.Run(t, sqlcoordtest.Target[*sqlx.Tx]{Driver: d, Other: env.DB, Tag: tag("sqlx"), Workers: workers, Pooler: viaPooler})
		// the callback gets the app's *sqlx.Tx, driver name intact
		err = txn.Do(ctx, d, txn.Options{}, func(ctx context.Context, tx *sqlx.Tx) error {
			_, err := tx.NamedExecContext(ctx, `UPDATE conf_items_`+tag("sqlx")+` SET body = :body WHERE id = :id`, map[string]any{"body": "named", "id": "x"})
			return err
		})
		if err != nil {
			t.Fatalf("NamedExec in txn.Do: %v", err)
		}
	})
	if env.Family != "postgres" {
		return
	}
	t.Run("pgxpool", func(t *testing.T) {
		cfg, err := pgxpool.ParseConfig(dsn)
		if err != nil {
			t.Fatal(err)
		}
		cfg.MaxConns = int32(conns)
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		d, err := pgxv5.Wrap(ctx, pool, wo)
		if err != nil {
			t.Fatal(err)
		}
		sqlcoordtest.Run(t, sqlcoordtest.Target[pgx.Tx]{Driver: d, Other: env.DB, Tag: tag("pgx"), Workers: workers, Pooler: viaPooler})
	})
}

// The conformance suite on every dialect and every stack, each
// pool limited to ONE connection (a helper that needs a second connection
// under the caller's transaction hangs and fails), and on a 16-connection
// pool with 8 goroutines.
func TestConformance(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		t.Run("one connection", func(t *testing.T) { runStacks(t, env, env.DSN, 1, 0, "one_", false) })
		t.Run("two connections", func(t *testing.T) { runStacks(t, env, env.DSN, 2, 2, "two_", false) })
		t.Run("16 connections", func(t *testing.T) { runStacks(t, env, env.DSN, 16, 8, "many_", false) })
	})
}

// The same suite through PgBouncer in transaction mode with one
// and with five server connections. pgx caches named prepared statements
// by default, which a transaction pooler hands to other clients; each
// stack is told, either the way its own queries need anyway
// (default_query_exec_mode=exec in the DSN) or by sqlcoord's Pooler
// option with the stack left in pgx's default mode.
func TestConformancePgBouncer(t *testing.T) {
	t.Parallel()
	env := dbtest.New(t, "postgres")
	for _, size := range []int{1, 5} {
		t.Run(fmt.Sprintf("pool=%d", size), func(t *testing.T) {
			dsn := env.PgBouncer(t, size)
			t.Run("told by the DSN", func(t *testing.T) {
				runStacks(t, env, dsn+"&default_query_exec_mode=exec", 16, 8, fmt.Sprintf("bd%d_", size), false, true)
			})
			t.Run("told by the Pooler option", func(t *testing.T) {
				runStacks(t, env, dsn, 16, 8, fmt.Sprintf("bo%d_", size), true, true)
			})
		})
	}
}

// Not told, pgx's default statement cache through a
// transaction-mode PgBouncer fails — loudly, with an error that says what
// to set.
func TestPgBouncerNotToldIsATypedError(t *testing.T) {
	t.Parallel()
	env := dbtest.New(t, "postgres")
	ctx := context.Background()
	db, err := sqlcoord.Open(ctx, env.PgBouncer(t, 1), sqlcoord.Options{MaxOpenConns: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	c := coord.New(db)
	var errs []error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				if l, err := c.Acquire(ctx, fmt.Sprintf("nt-%d-%d", w, i), "", time.Minute); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				} else {
					c.Release(ctx, l)
				}
			}
		}()
	}
	wg.Wait()
	if len(errs) == 0 {
		t.Skip("no statement collided this time (the bouncer happened to keep every client on one server connection)")
	}
	for _, err := range errs {
		if !errors.Is(err, sqlcoord.ErrPreparedStatementLost) || !strings.Contains(err.Error(), "default_query_exec_mode=exec") {
			t.Fatalf("untold pooler: %v, want ErrPreparedStatementLost naming the setting", err)
		}
	}
}
