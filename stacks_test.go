package sqlcoord_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jmoiron/sqlx"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/coord"
	"github.com/sqlcoord/sqlcoord/coord/jobs"
	"github.com/sqlcoord/sqlcoord/dialects"
	"github.com/sqlcoord/sqlcoord/internal/dbtest"
	"github.com/sqlcoord/sqlcoord/outbox"
	"github.com/sqlcoord/sqlcoord/txn"
)

// exercise runs every helper that works in the caller's transaction, and
// the ones that own theirs, through driver d — whose pool the caller has
// limited to ONE connection: a helper that needed a second connection
// while the caller's transaction holds the first would hang until the
// deadline. other is an independent pool on the same database, used to
// check that the lock is really held.
func exercise[TTx any](t *testing.T, d sqlcoord.Driver[TTx], other *sqlcoord.DB, tag string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := coord.New(d)
	oc := coord.New(other)
	keys := txn.NewKeys(d, txn.KeysOptions{})
	ob := outbox.NewOutbox(d)
	ph := d.Dialect().Placeholder
	lease, err := c.Acquire(ctx, "lease-"+tag, "", time.Minute)
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	var replay txn.Claim
	err = txn.Do(ctx, d, txn.Options{CommitMarker: "m-" + tag}, func(ctx context.Context, tx TTx) error {
		if err := c.TryLock(ctx, tx, "lock-"+tag); err != nil { // first use: the row is created in tx
			return err
		}
		// held: another transaction cannot take it
		otx, err := other.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer otx.Rollback()
		if err := oc.TryLock(ctx, otx, "lock-"+tag); !errors.Is(err, dialects.ErrLocked) {
			t.Errorf("second holder: %v, want ErrLocked", err)
		}
		if err := c.Lock(ctx, tx, "wait-"+tag, 500*time.Millisecond); err != nil {
			return err
		}
		if err := c.SetIdleTimeout(ctx, tx, 5*time.Second); err != nil {
			return err
		}
		if err := c.Fence(ctx, tx, "res-"+tag, lease.Token); err != nil {
			return err
		}
		// a fenced write that rewrites the same values twice: accepted both
		// times on every driver setting (no clientFoundRows needed)
		for i := 0; i < 2; i++ {
			if err := c.Update(ctx, tx, coord.FencedUpdate{Table: "items", KeyColumn: "id", Key: tag, FenceColumn: "fence",
				Token: lease.Token, Set: map[string]any{"body": "same"}}); err != nil {
				return err
			}
		}
		cl, err := keys.Begin(ctx, tx, "stack", tag, nil)
		if err != nil || cl.Replay {
			return errors.Join(err, errors.New("fresh key replayed"))
		}
		if err := keys.Complete(ctx, tx, "stack", tag, []byte("created "+tag)); err != nil {
			return err
		}
		if err := ob.Enqueue(ctx, tx, outbox.New{Topic: "stack", Key: tag, Payload: []byte(tag)}); err != nil {
			return err
		}
		in, err := outbox.NewInbox(d, "stack-consumer")
		if err != nil {
			return err
		}
		if first, err := in.Receive(ctx, tx, "msg-"+tag); err != nil || !first {
			return errors.Join(err, errors.New("inbox: not first"))
		}
		ran, err := txn.NewBarrier(d).CallTx(ctx, tx, "g-"+tag, "b", txn.OpTry, func(context.Context, TTx) error { return nil })
		if err != nil || !ran {
			return errors.Join(err, errors.New("barrier did not run"))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("helpers in the app's transaction: %v", err)
	}
	err = txn.Do(ctx, d, txn.Options{}, func(ctx context.Context, tx TTx) error {
		var err error
		replay, err = keys.Begin(ctx, tx, "stack", tag, nil)
		return err
	})
	if err != nil || !replay.Replay || string(replay.Response) != "created "+tag {
		t.Fatalf("replay: %+v %v", replay, err)
	}
	// helpers that own their transactions
	var published []string
	r, err := outbox.NewRelay(d, outbox.PublisherFunc(func(_ context.Context, m outbox.Message) error {
		published = append(published, string(m.Payload))
		return nil
	}), outbox.RelayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := r.Once(ctx); err != nil || n != 1 || published[0] != tag {
		t.Fatalf("relay: %d %v %v", n, published, err)
	}
	runs := jobs.NewRuns(d)
	run, err := runs.Claim(ctx, "stack-job-"+tag, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), 0, 1, tag)
	if err != nil {
		t.Fatal(err)
	}
	if err := txn.Do(ctx, d, txn.Options{}, func(ctx context.Context, tx TTx) error {
		if err := runs.Fence(ctx, tx, run); err != nil {
			return err
		}
		return runs.Complete(ctx, tx, run)
	}); err != nil {
		t.Fatalf("job fence/complete: %v", err)
	}
	if err := runs.Fence(ctx, other, run); !errors.Is(err, sqlcoord.ErrNotATransaction) {
		t.Errorf("Fence with a pool: %v, want ErrNotATransaction", err)
	}
	if err := c.Release(ctx, lease); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := d.Executor().QueryRow(ctx, `SELECT count(*) FROM items WHERE id = `+ph(1)+` AND fence = `+ph(2), tag, lease.Token).Scan(&n); err != nil || n != 1 {
		t.Fatalf("fenced row: %d %v", n, err)
	}
}

// Issue 12: the application's own pool, in each stack, with one connection.
func TestStacksWithOneConnection(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		dbtest.Exec(t, env.DB, `CREATE TABLE items (id VARCHAR(40) PRIMARY KEY, body VARCHAR(40), fence BIGINT NOT NULL DEFAULT 0)`)
		for _, tag := range []string{"own", "sqldb", "sqlx", "pgx"} {
			dbtest.Exec(t, env.DB, env.DB.Rebind(`INSERT INTO items (id, body) VALUES (?, 'same')`), tag)
		}
		appDSN := env.DSN
		driverName := "pgx"
		if env.Family == "mysql" {
			// an application's own DSN: parseTime, but no clientFoundRows
			cfg, err := mysql.ParseDSN(env.DSN)
			if err != nil {
				t.Fatal(err)
			}
			cfg.ClientFoundRows = false
			appDSN, driverName = cfg.FormatDSN(), "mysql"
		}
		t.Run("sqlcoord.Open", func(t *testing.T) {
			db, err := sqlcoord.Open(ctx, env.DSN, sqlcoord.Options{MaxOpenConns: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			exercise(t, db, env.DB, "own")
		})
		t.Run("database/sql", func(t *testing.T) {
			raw, err := sql.Open(driverName, appDSN)
			if err != nil {
				t.Fatal(err)
			}
			defer raw.Close()
			raw.SetMaxOpenConns(1)
			db, err := sqlcoord.WrapDB(ctx, raw)
			if err != nil {
				t.Fatal(err)
			}
			exercise(t, db, env.DB, "sqldb")
		})
		t.Run("sqlx", func(t *testing.T) {
			x, err := sqlx.Open(driverName, appDSN)
			if err != nil {
				t.Fatal(err)
			}
			defer x.Close()
			x.SetMaxOpenConns(1)
			d, err := sqlcoord.WrapSQLX(ctx, x)
			if err != nil {
				t.Fatal(err)
			}
			exercise(t, d, env.DB, "sqlx")
			// the callback gets the app's *sqlx.Tx, driver name intact
			err = txn.Do(ctx, d, txn.Options{}, func(ctx context.Context, tx *sqlx.Tx) error {
				_, err := tx.NamedExecContext(ctx, `UPDATE items SET body = :body WHERE id = :id`, map[string]any{"body": "named", "id": "sqlx"})
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
			cfg, err := pgxpool.ParseConfig(env.DSN)
			if err != nil {
				t.Fatal(err)
			}
			cfg.MaxConns = 1
			pool, err := pgxpool.NewWithConfig(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			d, err := sqlcoord.WrapPgxPool(ctx, pool)
			if err != nil {
				t.Fatal(err)
			}
			exercise(t, d, env.DB, "pgx")
		})
	})
}

// A MySQL pool that does not parse times (or reads them in another zone)
// is refused at construction with an error that names the setting.
func TestWrapChecksDriverSettings(t *testing.T) {
	env := dbtest.New(t, "mysql")
	ctx := context.Background()
	for setting, mutate := range map[string]func(*mysql.Config){
		"parseTime=true": func(c *mysql.Config) { c.ParseTime = false },
		"loc=UTC":        func(c *mysql.Config) { c.Loc, _ = time.LoadLocation("Europe/Berlin") },
	} {
		cfg, err := mysql.ParseDSN(env.DSN)
		if err != nil {
			t.Fatal(err)
		}
		mutate(cfg)
		raw, err := sql.Open("mysql", cfg.FormatDSN())
		if err != nil {
			t.Fatal(err)
		}
		_, err = sqlcoord.WrapDB(ctx, raw)
		raw.Close()
		if !errors.Is(err, sqlcoord.ErrDriverSetting) || !strings.Contains(err.Error(), strings.Split(setting, "=")[0]) {
			t.Errorf("without %s: %v", setting, err)
		}
	}
}
