package sqlcoord_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord/migrate"
	"github.com/sqlcoord/sqlcoord/pgxv5"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/outbox"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

// listenFor runs l.Listen in the background and reports its end.
func listenFor(ctx context.Context, l sqlcoord.Listener, opt sqlcoord.ListenOptions, woke chan<- struct{}) <-chan error {
	done := make(chan error, 1)
	go func() {
		done <- l.Listen(ctx, "probe_test", opt, func() {
			select {
			case woke <- struct{}{}:
			default:
			}
		})
	}()
	return done
}

// LISTEN through a transaction-mode PgBouncer "succeeds" and
// never delivers; the probe finds that out, and a direct listener works.
func TestListenProbeBehindPgBouncer(t *testing.T) {
	t.Parallel()
	env := dbtest.New(t, "postgres")
	ctx := context.Background()
	opt := sqlcoord.ListenOptions{Probe: true, ProbeTimeout: time.Second}
	notify := func(t *testing.T) {
		if _, err := env.DB.ExecContext(ctx, `SELECT pg_notify('probe_test', 'hello')`); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("direct: the probe passes and notifications wake", func(t *testing.T) {
		lctx, cancel := context.WithCancel(ctx)
		defer cancel()
		woke := make(chan struct{}, 1)
		done := listenFor(lctx, env.DB, opt, woke)
		deadline := time.After(10 * time.Second)
		for {
			notify(t)
			select {
			case <-woke:
				cancel()
				if err := <-done; err != nil {
					t.Fatalf("listen ended with %v", err)
				}
				return
			case err := <-done:
				t.Fatalf("listen ended early: %v", err)
			case <-time.After(200 * time.Millisecond):
			case <-deadline:
				t.Fatal("no notification delivered on a direct connection")
			}
		}
	})
	for _, size := range []int{1, 5} {
		t.Run(fmt.Sprintf("pgbouncer pool=%d", size), func(t *testing.T) {
			bdsn := env.PgBouncer(t, size) + "&default_query_exec_mode=exec"
			bdb, err := sqlcoord.Open(ctx, bdsn)
			if err != nil {
				t.Fatal(err)
			}
			defer bdb.Close()
			t.Run("without the probe nothing arrives", func(t *testing.T) {
				lctx, cancel := context.WithCancel(ctx)
				defer cancel()
				woke := make(chan struct{}, 1)
				done := listenFor(lctx, bdb, sqlcoord.ListenOptions{}, woke)
				time.Sleep(300 * time.Millisecond) // LISTEN has run
				for i := 0; i < 5; i++ {
					if _, err := bdb.ExecContext(ctx, `SELECT pg_notify('probe_test', 'hello')`); err != nil {
						t.Fatal(err)
					}
					notify(t)
				}
				select {
				case <-woke:
					t.Fatal("a notification arrived through a transaction-mode bouncer")
				case <-time.After(time.Second):
				}
				cancel()
				<-done
			})
			t.Run("the probe reports the lost notification", func(t *testing.T) {
				pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				defer cancel()
				err := bdb.Listen(pctx, "probe_test", opt, func() {})
				if !errors.Is(err, sqlcoord.ErrNotificationLost) || !errors.Is(err, sqlcoord.ErrListenUnsupported) {
					t.Fatalf("Listen with probe: %v, want ErrNotificationLost", err)
				}
			})
			t.Run("a direct DSNListener works", func(t *testing.T) {
				l, err := pgxv5.NewDSNListener(env.DSN)
				if err != nil {
					t.Fatal(err)
				}
				lctx, cancel := context.WithCancel(ctx)
				defer cancel()
				woke := make(chan struct{}, 1)
				done := listenFor(lctx, l, opt, woke)
				time.Sleep(1500 * time.Millisecond) // past the probe
				select {
				case err := <-done:
					t.Fatalf("direct listener ended: %v", err)
				default:
				}
				// an Enqueue through the bouncer notifies the direct listener
				if _, err := bdb.ExecContext(ctx, `SELECT pg_notify('probe_test', 'through the bouncer')`); err != nil {
					t.Fatal(err)
				}
				select {
				case <-woke:
				case <-time.After(5 * time.Second):
					t.Fatal("direct listener got nothing")
				}
			})
		})
	}
}

// A relay in the default (auto) listen mode behind PgBouncer
// logs why it does not listen and delivers everything by polling; given a
// direct Listener it is woken by NOTIFY.
func TestRelayBehindPgBouncer(t *testing.T) {
	t.Parallel()
	env := dbtest.New(t, "postgres")
	ctx := context.Background()
	bdb, err := sqlcoord.Open(ctx, env.PgBouncer(t, 2), sqlcoord.Options{Pooler: true})
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	direct, err := pgxv5.NewDSNListener(env.DSN)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		listener sqlcoord.Listener
		wantLog  string
	}{
		{"auto", nil, "outbox listen off; polling only"},
		{"auto with a direct listener", direct, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got atomic.Int64
			logs := &dbtest.Buffer{}
			r, err := outbox.NewRelay(bdb, outbox.PublisherFunc(func(context.Context, outbox.Message) error {
				got.Add(1)
				return nil
			}), outbox.RelayOptions{Listener: tc.listener, PollMin: 20 * time.Millisecond, PollMax: 100 * time.Millisecond,
				Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))})
			if err != nil {
				t.Fatal(err)
			}
			rctx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- r.Run(rctx) }()
			ob := outbox.New(bdb)
			start := got.Load()
			for i := 0; i < 20; i++ {
				if err := ob.EnqueueNow(ctx, outbox.Msg{Topic: "bouncer", Payload: []byte("m")}); err != nil {
					t.Fatal(err)
				}
			}
			deadline := time.Now().Add(20 * time.Second)
			for got.Load()-start < 20 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			time.Sleep(3500 * time.Millisecond) // past the probe
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if n := got.Load() - start; n != 20 {
				t.Fatalf("published %d of 20", n)
			}
			out := logs.String()
			if tc.wantLog != "" && (!strings.Contains(out, tc.wantLog) || !strings.Contains(out, "PgBouncer")) {
				t.Fatalf("relay log has no reason for polling:\n%s", out)
			}
			if tc.wantLog == "" && strings.Contains(out, "listen off") {
				t.Fatalf("direct listener refused:\n%s", out)
			}
		})
	}
}

// Migrations and the schema check through a transaction-mode
// PgBouncer (golang-migrate's own statements used to be cached prepared
// statements: "42P05 … already exists" from the second run on).
func TestMigrateThroughPgBouncer(t *testing.T) {
	t.Parallel()
	env := dbtest.New(t, "postgres", dbtest.NoMigrate())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db, err := sqlcoord.Open(ctx, env.PgBouncer(t, 5))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i, dir := range []migrate.Target{migrate.Up, migrate.Down, migrate.Up} {
		if err := migrate.Migrate(ctx, db, dir); err != nil {
			t.Fatalf("migrate step %d: %v", i, err)
		}
	}
	if err := sqlcoord.CheckSchema(ctx, db); err != nil {
		t.Fatal(err)
	}
}
