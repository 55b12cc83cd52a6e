package coord_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/coord"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

func TestLeaseLifecycle(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		c := coord.New(env.DB)
		a, err := c.Acquire(ctx, "leader", "", 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if a.Token != 1 || a.Owner == "" {
			t.Fatalf("first lease %+v", a)
		}
		// another owner is refused
		_, err = c.Acquire(ctx, "leader", "B", 10*time.Second)
		if !errors.Is(err, coord.ErrLeaseHeld) || !errors.Is(err, sqlcoord.ErrLocked) {
			t.Fatalf("second owner: %v", err)
		}
		// same owner re-acquires: same token, later expiry
		a2, err := c.Acquire(ctx, "leader", a.Owner, 20*time.Second)
		if err != nil || a2.Token != a.Token || !a2.ExpiresAt.After(a.ExpiresAt) {
			t.Fatalf("re-acquire by owner: %+v %v", a2, err)
		}
		// renew / release by a non-owner or with an old token fail
		bad := a2
		bad.Owner = "B"
		if _, err := c.Renew(ctx, bad); !errors.Is(err, coord.ErrLeaseLost) {
			t.Fatalf("renew by non-owner: %v", err)
		}
		if err := c.Release(ctx, bad); !errors.Is(err, coord.ErrLeaseLost) {
			t.Fatalf("release by non-owner: %v", err)
		}
		old := a2
		old.Token = a2.Token - 1
		if err := c.Release(ctx, old); !errors.Is(err, coord.ErrLeaseLost) {
			t.Fatalf("release with old token: %v", err)
		}
		r, err := c.Renew(ctx, a2)
		if err != nil || r.Token != a2.Token {
			t.Fatalf("renew by owner: %+v %v", r, err)
		}
		// release, then re-acquire by anyone gives a larger token
		if err := c.Release(ctx, r); err != nil {
			t.Fatal(err)
		}
		if err := c.Release(ctx, r); !errors.Is(err, coord.ErrLeaseLost) {
			t.Fatalf("double release: %v", err)
		}
		b, err := c.Acquire(ctx, "leader", "B", 10*time.Second)
		if err != nil || b.Token <= r.Token {
			t.Fatalf("after release: %+v %v", b, err)
		}
		// the old owner re-acquiring after losing it gets yet another token
		c.Release(ctx, b)
		a3, err := c.Acquire(ctx, "leader", a.Owner, 10*time.Second)
		if err != nil || a3.Token <= b.Token {
			t.Fatalf("old owner again: %+v %v", a3, err)
		}
		if _, err := c.Renew(ctx, a2); !errors.Is(err, coord.ErrLeaseLost) {
			t.Fatalf("renew with superseded token: %v", err)
		}
		st, err := c.LeaseInfo(ctx, "leader")
		if err != nil || st.Token != a3.Token || !st.Live {
			t.Fatalf("info %+v %v", st, err)
		}

		// expiry is decided by the database clock
		e, err := c.Acquire(ctx, "short", "A", 200*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(400 * time.Millisecond)
		if _, err := c.Renew(ctx, e); !errors.Is(err, coord.ErrLeaseLost) {
			t.Fatalf("renew after expiry: %v", err)
		}
		f, err := c.Acquire(ctx, "short", "B", time.Second)
		if err != nil || f.Token != e.Token+1 {
			t.Fatalf("takeover after expiry: %+v %v", f, err)
		}

		// invalid input
		for _, ttl := range []time.Duration{0, -time.Second, 400 * 24 * time.Hour} {
			if _, err := c.Acquire(ctx, "x", "", ttl); !errors.Is(err, coord.ErrInvalidTTL) {
				t.Fatalf("ttl %v: %v", ttl, err)
			}
		}
		if _, err := c.Acquire(ctx, "", "", time.Second); !errors.Is(err, coord.ErrInvalidName) {
			t.Fatalf("empty name: %v", err)
		}
	})
}

func TestKeepAlive(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		c := coord.New(env.DB)
		l, err := c.Acquire(ctx, "ka", "", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		k, err := c.KeepAlive(ctx, l, coord.KeepAliveOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer k.Stop()
		time.Sleep(2500 * time.Millisecond) // 2.5 TTLs: only renewals keep it
		if k.Context().Err() != nil {
			t.Fatalf("keeper gave up: %v", context.Cause(k.Context()))
		}
		if _, err := c.Acquire(ctx, "ka", "thief", time.Second); !errors.Is(err, coord.ErrLeaseHeld) {
			t.Fatalf("kept lease was taken: %v", err)
		}
		if !k.Lease().ExpiresAt.After(l.ExpiresAt) {
			t.Fatal("expiry not extended")
		}
		// Steal it after an expiry the keeper did not see (as if its
		// renewals had been delayed): its context must be cancelled.
		if _, err := env.DB.ExecContext(ctx, "UPDATE coord_leases SET expires_at = expires_at - INTERVAL '1 hour' WHERE name = 'ka'"); err != nil && env.Family == "postgres" {
			t.Fatal(err)
		}
		if env.Family == "mysql" {
			if _, err := env.DB.ExecContext(ctx, "UPDATE coord_leases SET expires_at = expires_at - INTERVAL 1 HOUR WHERE name = 'ka'"); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := c.Acquire(ctx, "ka", "thief", 10*time.Second); err != nil {
			t.Fatal(err)
		}
		select {
		case <-k.Context().Done():
			if !errors.Is(context.Cause(k.Context()), coord.ErrLeaseLost) {
				t.Fatalf("cause %v", context.Cause(k.Context()))
			}
		case <-time.After(2 * time.Second):
			t.Fatal("keeper did not notice the lost lease")
		}
	})
}

// The network to the database fails: renewals cannot succeed, and the
// keeper cancels the work before the lease could have expired.
func TestKeepAliveNetworkDown(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		proxy, db := dbtest.OpenVia(t, env)
		c := coord.New(db)
		ttl := 800 * time.Millisecond
		l, err := c.Acquire(ctx, "net", "", ttl)
		if err != nil {
			t.Fatal(err)
		}
		k, err := c.KeepAlive(ctx, l, coord.KeepAliveOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer k.Stop()
		time.Sleep(ttl) // renewals work
		if k.Context().Err() != nil {
			t.Fatal("keeper gave up while the network was fine")
		}
		proxy.SetDown(true)
		down := time.Now()
		select {
		case <-k.Context().Done():
		case <-time.After(5 * ttl):
			t.Fatal("keeper kept going with the database unreachable")
		}
		el := time.Since(down)
		if !errors.Is(context.Cause(k.Context()), coord.ErrLeaseLost) {
			t.Fatalf("cause %v", context.Cause(k.Context()))
		}
		st, err := coord.New(env.DB).LeaseInfo(ctx, "net")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("network cut; keeper cancelled the work %v later (TTL %v); database still shows the lease live: %v", el, ttl, st.Live)
		if el > ttl+500*time.Millisecond {
			t.Fatalf("cancelled %v after the cut, well past one TTL", el)
		}
	})
}

// An Acquire reports the epoch it was granted in, so the client's
// high-water mark follows the server: after another client starts a new
// epoch, the next Acquire on the same connection (MariaDB keeps the base
// in a session variable between the statement's select and RETURNING)
// raises the mark to the new base and its token is above it.
func TestAcquireObservesEpoch(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		a := env.Open(t, sqlcoord.Options{MaxOpenConns: 1})
		ca := coord.New(a)
		l, err := ca.Acquire(ctx, "epoch-follow", "a", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := ca.Release(ctx, l); err != nil {
			t.Fatal(err)
		}
		base, err := sqlcoord.AdvanceEpoch(ctx, env.DB)
		if err != nil {
			t.Fatal(err)
		}
		if base <= a.Epochs().Seen() {
			t.Fatalf("advanced to %d, not above the mark %d", base, a.Epochs().Seen())
		}
		l, err = ca.Acquire(ctx, "epoch-follow", "a", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if got := a.Epochs().Seen(); got != base || l.Token <= base {
			t.Fatalf("after the advance to %d: mark %d, token %d", base, got, l.Token)
		}
	})
}
