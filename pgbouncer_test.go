package sqlcoord_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/coord"
	"github.com/sqlcoord/sqlcoord/coord/jobs"
	"github.com/sqlcoord/sqlcoord/dialects"
	"github.com/sqlcoord/sqlcoord/internal/dbtest"
	"github.com/sqlcoord/sqlcoord/outbox"
	"github.com/sqlcoord/sqlcoord/txn"
)

// hammer runs locks, leases + fences, idempotency keys, outbox enqueues and
// job claims from many goroutines through d and returns every error. Many
// client connections sharing few server connections is what makes
// prepared statements collide behind a transaction-mode pooler.
func hammer[TTx any](t *testing.T, d sqlcoord.Driver[TTx], tag string, workers, iters int) []error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := coord.New(d)
	keys := txn.NewKeys(d, txn.KeysOptions{})
	ob := outbox.NewOutbox(d)
	runs := jobs.NewRuns(d)
	var mu sync.Mutex
	var errs []error
	fail := func(what string, err error) {
		mu.Lock()
		defer mu.Unlock()
		errs = append(errs, fmt.Errorf("%s: %w", what, err))
	}
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < iters; i++ {
				id := fmt.Sprintf("%s-%d-%d", tag, w, i)
				lease, err := c.Acquire(ctx, "lease-"+id, "", time.Minute)
				if err != nil {
					fail("acquire", err)
					continue
				}
				err = txn.Do(ctx, d, txn.Options{}, func(ctx context.Context, tx TTx) error {
					if err := c.TryLock(ctx, tx, fmt.Sprintf("lock-%s-%d", tag, i%3)); err != nil && !errors.Is(err, dialects.ErrLocked) {
						return fmt.Errorf("trylock: %w", err)
					}
					if err := c.Fence(ctx, tx, "res-"+id, lease.Token); err != nil {
						return fmt.Errorf("fence: %w", err)
					}
					if _, err := keys.Begin(ctx, tx, "hammer", id, nil); err != nil {
						return fmt.Errorf("keys: %w", err)
					}
					if err := keys.Complete(ctx, tx, "hammer", id, []byte("ok")); err != nil {
						return fmt.Errorf("keys complete: %w", err)
					}
					return ob.Enqueue(ctx, tx, outbox.New{Topic: "hammer", Payload: []byte(id)})
				})
				if err != nil {
					fail("tx", err)
				}
				if _, err := runs.Claim(ctx, "hammer-"+tag, time.Date(2026, 1, 1, 0, i, 0, 0, time.UTC), 0, 1, id); err != nil && !errors.Is(err, jobs.ErrAlreadyClaimed) {
					fail("claim", err)
				}
				if err := c.Release(ctx, lease); err != nil {
					fail("release", err)
				}
			}
		}()
	}
	wg.Wait()
	if err := sqlcoord.CheckSchema(ctx, d); err != nil {
		errs = append(errs, fmt.Errorf("check schema: %w", err))
	}
	return errs
}

func reportErrs(t *testing.T, errs []error) {
	t.Helper()
	for i, err := range errs {
		if i == 5 {
			t.Errorf("… %d errors in all", len(errs))
			break
		}
		t.Errorf("%v", err)
	}
}

// Issue 12: every stack works through PgBouncer in transaction mode, with
// the stack's default statement mode (pgx caches prepared statements by
// default, which a transaction pooler breaks), with a pool of one server
// connection and of five.
func TestPgBouncerTransactionMode(t *testing.T) {
	env := dbtest.New(t, "postgres")
	for _, size := range []int{1, 5} {
		t.Run(fmt.Sprintf("pool=%d", size), func(t *testing.T) {
			ctx := context.Background()
			dsn := env.PgBouncer(t, size)
			t.Run("sqlcoord.Open", func(t *testing.T) {
				db, err := sqlcoord.Open(ctx, dsn, sqlcoord.Options{MaxOpenConns: 16})
				if err != nil {
					t.Fatal(err)
				}
				defer db.Close()
				reportErrs(t, hammer(t, db, fmt.Sprintf("open%d", size), 8, 15))
			})
			t.Run("database/sql", func(t *testing.T) {
				raw, err := sql.Open("pgx", dsn)
				if err != nil {
					t.Fatal(err)
				}
				defer raw.Close()
				raw.SetMaxOpenConns(16)
				db, err := sqlcoord.WrapDB(ctx, raw)
				if err != nil {
					t.Fatal(err)
				}
				reportErrs(t, hammer(t, db, fmt.Sprintf("sql%d", size), 8, 15))
			})
			t.Run("pgxpool", func(t *testing.T) {
				cfg, err := pgxpool.ParseConfig(dsn)
				if err != nil {
					t.Fatal(err)
				}
				cfg.MaxConns = 16
				pool, err := pgxpool.NewWithConfig(ctx, cfg)
				if err != nil {
					t.Fatal(err)
				}
				defer pool.Close()
				d, err := sqlcoord.WrapPgxPool(ctx, pool)
				if err != nil {
					t.Fatal(err)
				}
				reportErrs(t, hammer(t, d, fmt.Sprintf("pgx%d", size), 8, 15))
			})
		})
	}
}

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

// Issue 12: LISTEN through a transaction-mode PgBouncer "succeeds" and
// never delivers; the probe finds that out, and a direct listener works.
func TestListenProbeBehindPgBouncer(t *testing.T) {
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
			bdsn := env.PgBouncer(t, size)
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
				l, err := sqlcoord.NewDSNListener(env.DSN)
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

// syncBuf is a log sink safe for the relay's goroutines.
type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Issue 12: a relay in the default (auto) listen mode behind PgBouncer
// logs why it does not listen and delivers everything by polling; given a
// direct Listener it is woken by NOTIFY.
func TestRelayBehindPgBouncer(t *testing.T) {
	env := dbtest.New(t, "postgres")
	ctx := context.Background()
	bdb, err := sqlcoord.Open(ctx, env.PgBouncer(t, 2))
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	direct, err := sqlcoord.NewDSNListener(env.DSN)
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
			logs := &syncBuf{}
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
			ob := outbox.NewOutbox(bdb)
			start := got.Load()
			for i := 0; i < 20; i++ {
				if err := ob.EnqueueNow(ctx, outbox.New{Topic: "bouncer", Payload: []byte("m")}); err != nil {
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
