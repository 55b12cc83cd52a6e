package sqlcoord_test

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	coordmigrate "github.com/sqlcoord/sqlcoord/migrate"

	"testing/fstest"

	"github.com/golang-migrate/migrate/v4"
	"github.com/golang-migrate/migrate/v4/database"
	migratemysql "github.com/golang-migrate/migrate/v4/database/mysql"
	migratepgx "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	"github.com/golang-migrate/migrate/v4/source/iofs"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/dialects"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

func tableExists(t *testing.T, db *sqlcoord.DB, name string) bool {
	t.Helper()
	var n int
	q := `SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = $1`
	if db.Dialect().Family() == "mysql" {
		q = `SELECT count(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = ?`
	}
	if err := db.QueryRowContext(context.Background(), q, name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n == 1
}

func TestMigrateUpDownUp(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		db := env.DB
		st, err := sqlcoord.MigrationStatus(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		if st.Version != 0 || len(st.Pending) == 0 {
			t.Fatalf("fresh database: %+v", st)
		}
		// Helpers on a database without the schema say what to do.
		if err := sqlcoord.CheckSchema(ctx, db); !errors.Is(err, sqlcoord.ErrNoSchema) || !strings.Contains(err.Error(), "sqlcoord migrate up") {
			t.Fatalf("CheckSchema on empty db: %v", err)
		}
		_, err = db.ExecContext(ctx, "SELECT name FROM coord_locks")
		if err = db.Dialect().Classify(err); !errors.Is(err, sqlcoord.ErrNoSchema) {
			t.Fatalf("query without schema: %v", err)
		}

		for round := 0; round < 2; round++ {
			if err := coordmigrate.Migrate(ctx, db, coordmigrate.Up); err != nil {
				t.Fatalf("up: %v", err)
			}
			st, err = sqlcoord.MigrationStatus(ctx, db)
			if err != nil || st.Version != st.Latest || st.Dirty || len(st.Pending) != 0 {
				t.Fatalf("after up: %+v %v", st, err)
			}
			var v int
			if err := db.QueryRowContext(ctx, "SELECT version FROM coord_schema_migrations").Scan(&v); err != nil || uint(v) != st.Latest {
				t.Fatalf("coord_schema_migrations version %d, %v", v, err)
			}
			if !tableExists(t, db, "coord_locks") || !tableExists(t, db, "coord_leases") {
				t.Fatal("tables missing after up")
			}
			if err := sqlcoord.CheckSchema(ctx, db); err != nil {
				t.Fatal(err)
			}
			// up again is a no-op
			if err := coordmigrate.Migrate(ctx, db, coordmigrate.Up); err != nil {
				t.Fatalf("second up: %v", err)
			}
			if err := coordmigrate.Migrate(ctx, db, coordmigrate.To(1)); err != nil {
				t.Fatalf("to 1: %v", err)
			}
			if !tableExists(t, db, "coord_locks") || tableExists(t, db, "coord_leases") {
				t.Fatal("to(1) should keep coord_locks only")
			}
			if err := coordmigrate.Migrate(ctx, db, coordmigrate.Down); err != nil {
				t.Fatalf("down: %v", err)
			}
			for _, tbl := range []string{"coord_locks", "coord_leases", "coord_fences"} {
				if tableExists(t, db, tbl) {
					t.Fatalf("%s survived down", tbl)
				}
			}
		}
	}, dbtest.NoMigrate())
}

// An application that uses golang-migrate itself keeps its own history.
func TestMigrateBesideApplicationMigrations(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		src := fstest.MapFS{
			"1_app.up.sql":   {Data: []byte("CREATE TABLE app_orders (id INT PRIMARY KEY)")},
			"1_app.down.sql": {Data: []byte("DROP TABLE app_orders")},
		}
		drvDB, err := sql.Open(env.DB.Dialect().DriverName(), env.DSN)
		if err != nil {
			t.Fatal(err)
		}
		var drv database.Driver
		if env.Family == "mysql" {
			drv, err = migratemysql.WithInstance(drvDB, &migratemysql.Config{})
		} else {
			drv, err = migratepgx.WithInstance(drvDB, &migratepgx.Config{})
		}
		if err != nil {
			t.Fatal(err)
		}
		s, _ := iofs.New(src, ".")
		m, err := migrate.NewWithInstance("iofs", s, env.Family, drv)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Up(); err != nil {
			t.Fatal(err)
		}
		m.Close()

		if err := coordmigrate.Migrate(ctx, env.DB, coordmigrate.Up); err != nil {
			t.Fatal(err)
		}
		if err := coordmigrate.Migrate(ctx, env.DB, coordmigrate.Down); err != nil {
			t.Fatal(err)
		}
		var v int
		var dirty bool
		if err := env.DB.QueryRowContext(ctx, "SELECT version, dirty FROM schema_migrations").Scan(&v, &dirty); err != nil || v != 1 || dirty {
			t.Fatalf("application's schema_migrations changed: v=%d dirty=%v err=%v", v, dirty, err)
		}
		if !tableExists(t, env.DB, "app_orders") {
			t.Fatal("application's table dropped")
		}
	}, dbtest.NoMigrate())
}

// Each sentinel error comes from a real server for a real statement.
func TestErrorClassification(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		db := env.DB
		d := db.Dialect()
		q := func(pg, my string) string {
			if d.Family() == "mysql" {
				return my
			}
			return pg
		}
		mustExec(t, db, q(`CREATE TABLE t (id int PRIMARY KEY, v int)`, `CREATE TABLE t (id int PRIMARY KEY, v int) ENGINE=InnoDB`))
		mustExec(t, db, `INSERT INTO t VALUES (1, 0), (2, 0)`)

		// duplicate
		_, err := db.ExecContext(ctx, `INSERT INTO t VALUES (1, 0)`)
		expect(t, d.Classify(err), sqlcoord.ErrDuplicate)

		// NOWAIT on a row locked by another connection
		holder, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := holder.ExecContext(ctx, q(`SELECT * FROM t WHERE id = 1 FOR UPDATE`, `SELECT * FROM t WHERE id = 1 FOR UPDATE`)); err != nil {
			t.Fatal(err)
		}
		tx, _ := db.BeginTx(ctx, nil)
		_, err = tx.ExecContext(ctx, q(`SELECT * FROM t WHERE id = 1 FOR UPDATE NOWAIT`, `SELECT * FROM t WHERE id = 1 FOR UPDATE NOWAIT`))
		err = d.Classify(err)
		if d.Family() == "postgres" {
			expect(t, err, sqlcoord.ErrLocked)
		} else {
			// MariaDB reports NOWAIT as 1205, the lock wait timeout code;
			// coord.TryLock turns it into ErrLocked because it asked for NOWAIT.
			expect(t, err, sqlcoord.ErrLockTimeout)
			var e *dialects.Error
			if !errors.As(err, &e) || e.Code != "1205" {
				t.Fatalf("MariaDB NOWAIT code: %v", err)
			}
		}
		tx.Rollback()

		// bounded wait
		tx, _ = db.BeginTx(ctx, nil)
		start := time.Now()
		if d.Family() == "postgres" {
			mustTxExec(t, tx, `SET LOCAL lock_timeout = '200ms'`)
			_, err = tx.ExecContext(ctx, `SELECT * FROM t WHERE id = 1 FOR UPDATE`)
		} else {
			_, err = tx.ExecContext(ctx, `SELECT * FROM t WHERE id = 1 FOR UPDATE WAIT 1`)
		}
		expect(t, d.Classify(err), sqlcoord.ErrLockTimeout)
		if el := time.Since(start); el < 150*time.Millisecond {
			t.Fatalf("lock timeout returned after %v, too soon", el)
		}
		tx.Rollback()
		holder.Rollback()

		// deadlock between two transactions
		a, _ := db.BeginTx(ctx, nil)
		b, _ := db.BeginTx(ctx, nil)
		mustTxExec(t, a, `UPDATE t SET v = 1 WHERE id = 1`)
		mustTxExec(t, b, `UPDATE t SET v = 1 WHERE id = 2`)
		var wg sync.WaitGroup
		var errA, errB error
		wg.Add(2)
		go func() { defer wg.Done(); _, errA = a.ExecContext(ctx, `UPDATE t SET v = 2 WHERE id = 2`) }()
		go func() {
			defer wg.Done()
			time.Sleep(100 * time.Millisecond)
			_, errB = b.ExecContext(ctx, `UPDATE t SET v = 2 WHERE id = 1`)
		}()
		wg.Wait()
		a.Rollback()
		b.Rollback()
		if !errors.Is(d.Classify(errA), sqlcoord.ErrDeadlock) && !errors.Is(d.Classify(errB), sqlcoord.ErrDeadlock) {
			t.Fatalf("no deadlock reported: a=%v b=%v", errA, errB)
		}
		if !sqlcoord.Retryable(d.Classify(errA)) && !sqlcoord.Retryable(d.Classify(errB)) {
			t.Fatal("deadlock should be retryable")
		}

		// serialization failure (PostgreSQL SERIALIZABLE); MySQL reports
		// write conflicts as deadlocks, covered above.
		if d.Family() == "postgres" {
			a, _ := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead})
			b, _ := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead})
			mustTxExec(t, a, `SELECT * FROM t`)
			mustTxExec(t, b, `SELECT * FROM t`)
			mustTxExec(t, a, `UPDATE t SET v = 10 WHERE id = 1`)
			if err := a.Commit(); err != nil {
				t.Fatal(err)
			}
			_, err := b.ExecContext(ctx, `UPDATE t SET v = 11 WHERE id = 1`)
			expect(t, d.Classify(err), dialects.ErrSerialization)
			b.Rollback()
		}

		// connection killed by the server mid-transaction → ErrConnLost,
		// and at COMMIT → ErrCommitUnknown.
		conn, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var id int64
		if err := conn.QueryRowContext(ctx, q(`SELECT pg_backend_pid()`, `SELECT CONNECTION_ID()`)).Scan(&id); err != nil {
			t.Fatal(err)
		}
		ctx2 := context.Background()
		ktx, err := conn.BeginTx(ctx2, nil)
		if err != nil {
			t.Fatal(err)
		}
		if d.Family() == "postgres" {
			mustExec(t, db, `SELECT pg_terminate_backend($1)`, id)
		} else {
			mustExec(t, db, `KILL ?`, id)
		}
		time.Sleep(100 * time.Millisecond)
		err = ktx.Commit()
		cerr := d.ClassifyCommit(err)
		if !errors.Is(cerr, sqlcoord.ErrCommitUnknown) {
			t.Fatalf("commit on killed connection: %v (raw %T %v)", cerr, err, err)
		}
		conn.Close()
	})
}

func TestOpenErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cases := []struct{ dsn, want string }{
		{"redis://u:s3cretpw@localhost:6379/0", "unknown scheme"},
		{"", "empty"},
		{"just-a-word", "not a DSN"},
		{"mysql://u:s3cretpw@tcp(127.0.0.1:1)", "database name"}, {"mysql://u:s3cretpw@tcp(127.0.0.1:1)/", "no database name"},
		{"postgres://u:s3cretpw@127.0.0.1:1/db?sslmode=disable&connect_timeout=2", "cannot connect"},
		{"mysql://u:s3cretpw@tcp(127.0.0.1:1)/db?timeout=2s", "cannot connect"},
		{"mysql://u:s3cretpw@127.0.0.1:1/db?timeout=2s", "cannot connect"},
		{"postgres://u:s3cretpw@[::1/db", "bad DSN"},
	}
	for _, c := range cases {
		_, err := sqlcoord.Open(ctx, c.dsn)
		if err == nil {
			t.Fatalf("%q: no error", c.dsn)
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want it to mention %q", c.dsn, err, c.want)
		}
		if strings.Contains(err.Error(), "s3cretpw") {
			t.Errorf("%q: error echoes the password: %v", c.dsn, err)
		}
		if !errors.Is(err, sqlcoord.ErrBadDSN) && !errors.Is(err, sqlcoord.ErrUnreachable) {
			t.Errorf("%q: %v is neither ErrBadDSN nor ErrUnreachable", c.dsn, err)
		}
	}
}

func TestOpenDetectsDialect(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		want := map[string]string{"postgres": "postgres", "mysql": "mariadb"}[env.Family]
		if env.DB.Dialect().Name() != want {
			t.Fatalf("dialect %s, want %s", env.DB.Dialect().Name(), want)
		}
		// mysql:// URL form and the go-sql-driver form open the same database
		if env.Family == "mysql" {
			db, err := sqlcoord.Open(context.Background(), "mysql://"+env.DSN)
			if err != nil {
				t.Fatal(err)
			}
			db.Close()
			u := "mysql://root@" + env.Server.Host + ":" + itoa(env.Server.Port) + "/" + env.Name
			db, err = sqlcoord.Open(context.Background(), u)
			if err != nil {
				t.Fatal(err)
			}
			db.Close()
		}
	}, dbtest.NoMigrate())
}

func itoa(n int) string { return strconv.Itoa(n) }

func mustExec(t *testing.T, db *sqlcoord.DB, q string, args ...any) {
	t.Helper()
	if _, err := db.ExecContext(context.Background(), q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func mustTxExec(t *testing.T, tx *sql.Tx, q string) {
	t.Helper()
	if _, err := tx.ExecContext(context.Background(), q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func expect(t *testing.T, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("got %v, want %v", err, want)
	}
}
