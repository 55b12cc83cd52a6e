package sqlcoord_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/coord/jobs"
	"github.com/sqlcoord/sqlcoord/dialects"
	"github.com/sqlcoord/sqlcoord/internal/dbtest"
	"github.com/sqlcoord/sqlcoord/outbox"
)

// readOnlyDSN returns env's DSN with every session read-only.
func readOnlyDSN(env *dbtest.Env) string {
	sep := "?"
	if strings.Contains(env.DSN, "?") {
		sep = "&"
	}
	if env.Family == "postgres" {
		return env.DSN + sep + "default_transaction_read_only=on"
	}
	return env.DSN + sep + "tx_read_only=1"
}

// Issue 11.8: conditions that retrying cannot fix end Scheduler.Run and
// Relay.Run with a typed error instead of running nothing silently.
func TestFatalConditionsEndRun(t *testing.T) {
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
			if err := runScheduler(t, env.DB); !errors.Is(err, dialects.ErrNoSchema) {
				t.Errorf("Scheduler.Run: %v, want ErrNoSchema", err)
			}
			if err := runRelay(t, env.DB); !errors.Is(err, dialects.ErrNoSchema) {
				t.Errorf("Relay.Run: %v, want ErrNoSchema", err)
			}
		})
		if err := sqlcoord.Migrate(ctx, env.DB, sqlcoord.Up); err != nil {
			t.Fatal(err)
		}
		t.Run("read-only", func(t *testing.T) {
			// a pending message, so that the relay has something to mark
			if err := outbox.NewOutbox(env.DB).Enqueue(ctx, env.DB, outbox.New{Topic: "t", Payload: []byte("x")}); err != nil {
				t.Fatal(err)
			}
			ro, err := sqlcoord.Open(ctx, readOnlyDSN(env))
			if err != nil {
				t.Fatal(err)
			}
			defer ro.Close()
			if err := runScheduler(t, ro); !errors.Is(err, dialects.ErrReadOnly) {
				t.Errorf("Scheduler.Run: %v, want ErrReadOnly", err)
			}
			if err := runRelay(t, ro); !errors.Is(err, dialects.ErrReadOnly) {
				t.Errorf("Relay.Run: %v, want ErrReadOnly", err)
			}
		})
	}, dbtest.NoMigrate())
}
