package coord_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord/coord"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

// A semaphore's API on both dialects.
func TestSemaphore(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		c := coord.New(env.DB)
		sem := func(t *testing.T, name string, n int) *coord.Semaphore[*sql.Tx] {
			t.Helper()
			s, err := c.Semaphore(name, n)
			if err != nil {
				t.Fatal(err)
			}
			return s
		}

		t.Run("at most N permits, each a lease with its own token", func(t *testing.T) {
			s := sem(t, "two", 2)
			p1, err := s.TryAcquire(ctx, "a", 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			p2, err := s.TryAcquire(ctx, "b", 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if p1.Slot == p2.Slot || p1.Token <= 0 || p2.Token <= 0 {
				t.Fatalf("permits %+v %+v", p1, p2)
			}
			_, err = s.TryAcquire(ctx, "c", 5*time.Second)
			var full *coord.SemaphoreFullError
			if !errors.As(err, &full) || !errors.Is(err, coord.ErrSemaphoreFull) || full.Permits != 2 {
				t.Fatalf("third TryAcquire: %v, want *SemaphoreFullError", err)
			}
			again, err := s.TryAcquire(ctx, "a", 5*time.Second)
			if err != nil || again.Slot != p1.Slot || again.Token != p1.Token {
				t.Fatalf("owner a again: %+v, %v; want its permit back", again, err)
			}
			hs, err := s.Holders(ctx)
			if err != nil || len(hs) != 2 {
				t.Fatalf("holders %+v, %v", hs, err)
			}
			if err := s.Release(ctx, p1); err != nil {
				t.Fatal(err)
			}
			if err := s.Release(ctx, p1); !errors.Is(err, coord.ErrLeaseLost) {
				t.Fatalf("double release: %v, want ErrLeaseLost", err)
			}
			p3, err := s.TryAcquire(ctx, "c", 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if p3.Slot == p1.Slot && p3.Token <= p1.Token {
				t.Fatalf("the slot's new token %d is not above %d", p3.Token, p1.Token)
			}
			s.Release(ctx, p2)
			s.Release(ctx, p3)
		})

		t.Run("a permit expires when its holder stops renewing", func(t *testing.T) {
			s := sem(t, "expiring", 1)
			if _, err := s.TryAcquire(ctx, "dies", 200*time.Millisecond); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			p, err := s.Acquire(ctx, "waits", 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Fatalf("waited %v for a 200 ms permit", d)
			}
			s.Release(ctx, p)
		})

		t.Run("Acquire waits for a release, first come first served", func(t *testing.T) {
			s := sem(t, "queue", 1)
			held, err := s.TryAcquire(ctx, "holder", 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			order := make(chan string, 3)
			for i, w := range []string{"w1", "w2", "w3"} {
				go func() {
					p, err := s.Acquire(ctx, w, 10*time.Second)
					if err != nil {
						t.Error(err)
						order <- ""
						return
					}
					order <- w
					time.Sleep(50 * time.Millisecond)
					s.Release(ctx, p)
				}()
				// the next waiter comes once this one has its ticket
				waitQueued(t, env, "semaphore:queue", i+1)
			}
			start := time.Now()
			if err := s.Release(ctx, held); err != nil {
				t.Fatal(err)
			}
			var got []string
			for range 3 {
				got = append(got, <-order)
			}
			t.Logf("three waiters served in %v", time.Since(start).Round(time.Millisecond))
			if got[0] != "w1" || got[1] != "w2" || got[2] != "w3" {
				t.Fatalf("served %v, want w1 w2 w3", got)
			}
		})

		t.Run("Acquire ends with its context", func(t *testing.T) {
			s := sem(t, "timeout", 1)
			held, _ := s.TryAcquire(ctx, "holder", 10*time.Second)
			defer s.Release(ctx, held)
			actx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			defer cancel()
			_, err := s.Acquire(actx, "late", time.Second)
			if !errors.Is(err, coord.ErrSemaphoreFull) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("got %v, want ErrSemaphoreFull and the deadline", err)
			}
		})

		t.Run("SetPermits changes N at run time and revokes above it", func(t *testing.T) {
			s := sem(t, "resize", 3)
			var ps []coord.Permit
			for _, o := range []string{"a", "b", "c"} {
				p, err := s.TryAcquire(ctx, o, 10*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				ps = append(ps, p)
			}
			if err := s.SetPermits(ctx, 1); err != nil {
				t.Fatal(err)
			}
			if n, _ := s.Permits(ctx); n != 1 {
				t.Fatalf("permits %d, want 1", n)
			}
			hs, _ := s.Holders(ctx)
			if len(hs) != 1 || hs[0].Slot != 0 {
				t.Fatalf("holders after lowering to 1: %+v", hs)
			}
			for _, p := range ps {
				if p.Slot > 0 {
					if _, err := c.Renew(ctx, p.Lease); !errors.Is(err, coord.ErrLeaseLost) {
						t.Fatalf("renewal of revoked slot %d: %v", p.Slot, err)
					}
				}
			}
			other := sem(t, "resize", 3) // another process's default does not override the recorded count
			if _, err := other.TryAcquire(ctx, "d", time.Second); !errors.Is(err, coord.ErrSemaphoreFull) {
				t.Fatalf("over the lowered count: %v", err)
			}
			if err := s.SetPermits(ctx, 2); err != nil {
				t.Fatal(err)
			}
			p, err := other.TryAcquire(ctx, "d", time.Second)
			if err != nil || p.Slot != 1 {
				t.Fatalf("after raising to 2: %+v, %v", p, err)
			}
		})

		t.Run("operator revokes a slot", func(t *testing.T) {
			s := sem(t, "revoke", 1)
			p, _ := s.TryAcquire(ctx, "a", 10*time.Second)
			if err := s.Revoke(ctx, p.Slot); err != nil {
				t.Fatal(err)
			}
			if err := s.Revoke(ctx, p.Slot); !errors.Is(err, coord.ErrLeaseLost) {
				t.Fatalf("second revoke: %v", err)
			}
			if err := s.Release(ctx, p); !errors.Is(err, coord.ErrLeaseLost) {
				t.Fatalf("release of a revoked permit: %v", err)
			}
		})

		t.Run("a name that shares a prefix is another semaphore", func(t *testing.T) {
			a, b := sem(t, "pre", 1), sem(t, "pre#0001", 1)
			pb, err := b.TryAcquire(ctx, "b", 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Release(ctx, pb)
			if hs, _ := a.Holders(ctx); len(hs) != 0 {
				t.Fatalf("semaphore pre lists %+v", hs)
			}
			pa, err := a.TryAcquire(ctx, "a", time.Second)
			if err != nil {
				t.Fatal(err)
			}
			a.Release(ctx, pa)
		})
	})
}

// waitQueued waits (up to 10 s) until queue holds n tickets: n waiters
// queued, in the order they took them.
func waitQueued(t *testing.T, env *dbtest.Env, queue string, n int) {
	t.Helper()
	q := env.DB.Rebind(`SELECT count(*) FROM coord_tickets WHERE queue = ?`)
	deadline := time.Now().Add(10 * time.Second)
	for {
		var got int
		if err := env.DB.QueryRowContext(context.Background(), q, queue).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d waiters queued after 10 s", got, n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
