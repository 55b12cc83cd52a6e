package coord_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/coord"
	"github.com/sqlcoord/sqlcoord/metrics"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

// acquireCounter counts lease.acquire statements (through metrics).
type acquireCounter struct {
	metrics.Nop
	n atomic.Int64
}

func (a *acquireCounter) Call(op, dialect, outcome string, d time.Duration) {
	if op == "lease.acquire" {
		a.n.Add(1)
	}
}

func TestAcquireWait(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		c := coord.New(env.DB)
		t.Run("gets the lease when it is released, without waiting out the TTL", func(t *testing.T) {
			a, err := c.Acquire(ctx, "handoff", "a", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			got := make(chan coord.Lease, 1)
			go func() {
				l, err := c.AcquireWait(ctx, "handoff", "b", time.Minute)
				if err != nil {
					t.Error(err)
				}
				got <- l
			}()
			time.Sleep(300 * time.Millisecond)
			released := time.Now()
			if err := c.Release(ctx, a); err != nil {
				t.Fatal(err)
			}
			select {
			case l := <-got:
				if l.Owner != "b" || l.Token <= a.Token {
					t.Fatalf("waiter got %+v", l)
				}
				t.Logf("%s: handed over %v after the release", env.Family, time.Since(released))
			case <-time.After(10 * time.Second):
				t.Fatal("the waiter did not get the released lease")
			}
		})
		t.Run("gets it when the holder's lease expires", func(t *testing.T) {
			if _, err := c.Acquire(ctx, "expiring", "a", 300*time.Millisecond); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			l, err := c.AcquireWait(ctx, "expiring", "b", time.Minute)
			if err != nil || l.Owner != "b" || time.Since(start) > 5*time.Second {
				t.Fatalf("%+v %v after %v", l, err, time.Since(start))
			}
		})
		t.Run("ends with the context, saying who holds it", func(t *testing.T) {
			if _, err := c.Acquire(ctx, "kept", "a", time.Minute); err != nil {
				t.Fatal(err)
			}
			// long enough for the first attempt to finish under load (it
			// is what says who holds the lease); the wait then times out
			wctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			_, err := c.AcquireWait(wctx, "kept", "b", time.Minute)
			if !errors.Is(err, coord.ErrLeaseHeld) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("%v, want ErrLeaseHeld and the deadline", err)
			}
		})
	})
}

// 32 waiters on one lease, each holding it briefly: every one gets it,
// one at a time, with strictly increasing tokens — and they queue instead
// of stampeding: a handful of acquire statements per waiter, not one per
// poll per waiter.
func TestAcquireWaitNoStampede(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		cnt := &acquireCounter{}
		db := env.Open(t, sqlcoord.Options{Metrics: cnt, MaxOpenConns: 80})
		c := coord.New(db)
		const waiters = 32
		var holding atomic.Int32
		var mu sync.Mutex
		var tokens []int64
		var wg sync.WaitGroup
		for i := 0; i < waiters; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
				defer cancel()
				l, err := c.AcquireWait(wctx, "hot", fmt.Sprintf("w%d", i), time.Minute)
				if err != nil {
					t.Error(err)
					return
				}
				if holding.Add(1) != 1 {
					t.Error("two holders at once")
				}
				mu.Lock()
				tokens = append(tokens, l.Token)
				mu.Unlock()
				time.Sleep(10 * time.Millisecond)
				holding.Add(-1)
				if err := c.Release(ctx, l); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		if len(tokens) != waiters || !sort.SliceIsSorted(tokens, func(i, j int) bool { return tokens[i] < tokens[j] }) {
			t.Fatalf("tokens in the order of holding: %v", tokens)
		}
		per := float64(cnt.n.Load()) / waiters
		t.Logf("%s: %d acquire statements for %d waiters (%.1f each)", env.Family, cnt.n.Load(), waiters, per)
		if per > 6 {
			t.Errorf("%.1f acquire statements per waiter: a stampede", per)
		}
	})
}

// helperLeaseWaiter waits for a lease, holds it 30 ms, prints its token.
func helperLeaseWaiter(ctx context.Context, db *sqlcoord.DB) error {
	c := coord.New(db)
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	l, err := c.AcquireWait(wctx, os.Getenv("LEASE"), "", time.Minute)
	if err != nil {
		return err
	}
	fmt.Println("GOT", l.Token, time.Now().UnixMicro())
	time.Sleep(30 * time.Millisecond)
	fmt.Println("RELEASING", time.Now().UnixMicro())
	return c.Release(context.WithoutCancel(ctx), l)
}

// Six processes wait for one lease: each gets it once, in turn.
func TestAcquireWaitAcrossProcesses(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		var ps []*dbtest.Proc
		for i := 0; i < 6; i++ {
			ps = append(ps, dbtest.Spawn(t, "lease-waiter", "DSN="+env.DSN, "LEASE=shared"))
		}
		type hold struct{ token, from, to int64 }
		var holds []hold
		for _, p := range ps {
			got := strings.Fields(p.WaitLine(t, "GOT", 60*time.Second))
			rel := strings.Fields(p.WaitLine(t, "RELEASING", 10*time.Second))
			tok, _ := strconv.ParseInt(got[1], 10, 64)
			from, _ := strconv.ParseInt(got[2], 10, 64)
			to, _ := strconv.ParseInt(rel[1], 10, 64)
			holds = append(holds, hold{tok, from, to})
		}
		sort.Slice(holds, func(i, j int) bool { return holds[i].from < holds[j].from })
		for i := 1; i < len(holds); i++ {
			if holds[i].token <= holds[i-1].token || holds[i].from < holds[i-1].to {
				t.Fatalf("holds overlap or tokens go back: %+v", holds)
			}
		}
	})
}

// TestReleaseWakesTheQueueHead (PostgreSQL): a waiter at the head of a
// lease's queue holds the queue's advisory lock, named as every version
// names it — "sqlcoord.lease-queue:" and the first 16 bytes of the
// name's SHA-256 in hex, written here as the server computed it before
// the client did — and listens on the lease's channel; Release must
// notify it, for ASCII and non-ASCII names alike. A queue name that
// differed would leave the head to its 5 ms poll and break waiters of
// the other version during a rolling upgrade.
func TestReleaseWakesTheQueueHead(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		if env.Family != "postgres" {
			t.Skip("MySQL/MariaDB waiters poll: Release sends no notification")
		}
		ctx := context.Background()
		c := coord.New(env.DB)
		for _, name := range []string{"queue-head", "Zürich-租約 ✓"} {
			t.Run(name, func(t *testing.T) {
				l, err := c.Acquire(ctx, name, "holder", time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				conn, err := env.DB.Conn(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock(hashtextextended(
  'sqlcoord.lease-queue:' || encode(substring(sha256(convert_to($1, 'UTF8')) FROM 1 FOR 16), 'hex'), 1936813155))`, name); err != nil {
					t.Fatal(err)
				}
				defer conn.ExecContext(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock_all()`)
				var channel string
				if err := conn.QueryRowContext(ctx, `SELECT 'coord_lease_' || left(md5($1), 16)`, name).Scan(&channel); err != nil {
					t.Fatal(err)
				}
				lctx, stop := context.WithCancel(ctx)
				defer stop()
				ready, woke := make(chan struct{}), make(chan struct{}, 1)
				go env.DB.Listen(lctx, channel, sqlcoord.ListenOptions{Ready: func() { close(ready) }}, func() {
					select {
					case woke <- struct{}{}:
					default:
					}
				})
				select {
				case <-ready:
				case <-time.After(10 * time.Second):
					t.Fatal("LISTEN did not take effect")
				}
				if err := c.Release(ctx, l); err != nil {
					t.Fatal(err)
				}
				select {
				case <-woke:
				case <-time.After(5 * time.Second):
					t.Fatal("Release did not notify the waiter holding the lease's queue lock")
				}
			})
		}
	})
}
