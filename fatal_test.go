package sqlcoord_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord/migrate"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/coord"
	"github.com/sqlcoord/sqlcoord/coord/ids"
	"github.com/sqlcoord/sqlcoord/coord/jobs"
	"github.com/sqlcoord/sqlcoord/outbox"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
	"github.com/sqlcoord/sqlcoord/txn"
)

// readOnlyDSN returns env's DSN with every session read-only.
func readOnlyDSN(env *dbtest.Env) string {
	sep := "?"
	if strings.Contains(env.DSN, "?") {
		sep = "&"
	}
	if env.Family == "postgres" {
		// without the target_session_attrs=read-write Open adds: that
		// would refuse the connection before the loops could see it
		dsn := strings.Replace(env.DSN, "target_session_attrs=read-write", "target_session_attrs=any", 1)
		return dsn + sep + "default_transaction_read_only=on"
	}
	return env.DSN + sep + "tx_read_only=1"
}

// Conditions that retrying cannot fix end Scheduler.Run and
// Relay.Run with a typed error instead of running nothing silently.
func TestFatalConditionsEndRun(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		job := jobs.Job{Name: "nightly", Schedule: "* * * * * *", Run: func(context.Context, jobs.Info) error { return nil }}
		runScheduler := func(t *testing.T, db *sqlcoord.DB) error {
			s := jobs.NewScheduler(db, jobs.Options{Tick: 10 * time.Millisecond})
			if err := s.Register(job); err != nil {
				t.Fatal(err)
			}
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			err := s.Run(rctx)
			if rctx.Err() != nil {
				t.Fatalf("Run kept going until its deadline (returned %v)", err)
			}
			return err
		}
		runRelay := func(t *testing.T, db *sqlcoord.DB) error {
			r, err := outbox.NewRelay(db, outbox.PublisherFunc(func(context.Context, outbox.Message) error { return nil }), outbox.RelayOptions{PollMax: 50 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			err = r.Run(rctx)
			if rctx.Err() != nil {
				t.Fatalf("Relay.Run kept going until its deadline (returned %v)", err)
			}
			return err
		}
		t.Run("no schema", func(t *testing.T) {
			if err := runScheduler(t, env.DB); !errors.Is(err, sqlcoord.ErrNoSchema) {
				t.Errorf("Scheduler.Run: %v, want ErrNoSchema", err)
			}
			if err := runRelay(t, env.DB); !errors.Is(err, sqlcoord.ErrNoSchema) {
				t.Errorf("Relay.Run: %v, want ErrNoSchema", err)
			}
		})
		if err := migrate.Migrate(ctx, env.DB, migrate.Up); err != nil {
			t.Fatal(err)
		}
		t.Run("read-only", func(t *testing.T) {
			// a pending message, so that the relay has something to mark
			if err := outbox.New(env.DB).EnqueueNow(ctx, outbox.Msg{Topic: "t", Payload: []byte("x")}); err != nil {
				t.Fatal(err)
			}
			ro, err := sqlcoord.Open(ctx, readOnlyDSN(env), sqlcoord.Options{AllowReadOnly: true}) // Open itself refuses it; the loops must too
			if err != nil {
				t.Fatal(err)
			}
			defer ro.Close()
			if err := runScheduler(t, ro); !errors.Is(err, sqlcoord.ErrReadOnly) {
				t.Errorf("Scheduler.Run: %v, want ErrReadOnly", err)
			}
			if err := runRelay(t, ro); !errors.Is(err, sqlcoord.ErrReadOnly) {
				t.Errorf("Relay.Run: %v, want ErrReadOnly", err)
			}
		})
	}, dbtest.NoMigrate())
}

// Bad input gets a typed error, never a silent default: negative durations
// in every options struct that takes one.
func TestNegativeDurationsRefused(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		db := env.DB
		noop := func(context.Context, *sql.Tx) error { return nil }
		for name, o := range map[string]txn.Options{"MaxAttempts": {MaxAttempts: -1}, "BaseBackoff": {BaseBackoff: -time.Second},
			"MaxBackoff": {MaxBackoff: -time.Second}, "VerifyTimeout": {VerifyTimeout: -time.Second}} {
			if err := txn.Do(ctx, db, o, noop); !errors.Is(err, txn.ErrInvalidOptions) {
				t.Errorf("Do with negative %s: %v", name, err)
			}
		}
		k := txn.NewKeys(db, txn.KeysOptions{LockFor: -time.Minute})
		if _, err := k.Start(ctx, "s", "k", nil); !errors.Is(err, txn.ErrInvalidOptions) {
			t.Errorf("Keys with negative LockFor: %v", err)
		}
		pub := outbox.PublisherFunc(func(context.Context, outbox.Message) error { return nil })
		for name, o := range map[string]outbox.RelayOptions{"PollMin": {PollMin: -1}, "PollMax": {PollMax: -1}, "BaseBackoff": {BaseBackoff: -1},
			"PublishTimeout": {PublishTimeout: -1}, "ShutdownTimeout": {ShutdownTimeout: -1}} {
			if _, err := outbox.NewRelay(db, pub, o); !errors.Is(err, outbox.ErrInvalid) {
				t.Errorf("NewRelay with negative %s: %v", name, err)
			}
		}
		if _, err := ids.NewSegments(db, "t", ids.SegmentOptions{MaxWait: -time.Second, AutoCreate: true}); !errors.Is(err, ids.ErrInvalid) {
			t.Errorf("NewSegments with negative MaxWait: %v", err)
		}
		s := jobs.NewScheduler(db, jobs.Options{})
		if err := s.Register(jobs.Job{Name: "j", Schedule: "* * * * *", Grace: -time.Second, Run: func(context.Context, jobs.Info) error { return nil }}); !errors.Is(err, jobs.ErrInvalid) {
			t.Errorf("Register with negative Grace: %v", err)
		}
		c := coord.New(db)
		if _, err := c.Acquire(ctx, "l", "", -time.Second); !errors.Is(err, coord.ErrInvalidTTL) {
			t.Errorf("Acquire with negative TTL: %v", err)
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if err := c.Lock(ctx, tx, "l", -time.Second); !errors.Is(err, coord.ErrInvalidTTL) {
			t.Errorf("Lock with negative wait: %v", err)
		}
		if _, err := txn.NewKeys(db, txn.KeysOptions{}).Cleanup(ctx, -time.Hour, 10); err == nil {
			t.Error("Cleanup with a negative age accepted")
		}
	})
}
