package coord_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/coord"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

const freezeLease = "frozen-holder"

// helperRenewer acquires freezeLease and renews it in a tight loop, so that
// a SIGSTOP almost always lands in the middle of a Renew (or Acquire).
func helperRenewer(ctx context.Context, db *sqlcoord.DB) error {
	ttl, _ := time.ParseDuration(os.Getenv("TTL"))
	c := coord.New(db)
	for ctx.Err() == nil {
		l, err := c.Acquire(ctx, freezeLease, "", ttl)
		if err != nil {
			time.Sleep(time.Millisecond)
			continue
		}
		fmt.Println("HOLDING", l.Token)
		for ctx.Err() == nil {
			if l, err = c.Renew(ctx, l); err != nil {
				break
			}
		}
	}
	return nil
}

// A holder frozen (SIGSTOP) in the middle of a lease operation
// must not block takeover: 20 freezes at random points of a tight Renew
// loop; each time the taker gets the lease within TTL + margin of the
// freeze (the holder stays frozen for 3 s, far longer).
func TestFrozenHolderDoesNotBlockTakeover(t *testing.T) {
	t.Parallel()
	const ttl = 300 * time.Millisecond
	const margin = 400 * time.Millisecond
	freezes := 20
	if testing.Short() {
		freezes = 5
	}
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		c := coord.New(env.DB)
		var worst time.Duration
		for i := 0; i < freezes; i++ {
			p := dbtest.Spawn(t, "lease-renewer", "DSN="+env.DSN, "TTL="+ttl.String())
			p.WaitLine(t, "HOLDING", 20*time.Second)
			time.Sleep(time.Duration(rand.IntN(50)) * time.Millisecond)
			p.Signal(syscall.SIGSTOP)
			frozen := time.Now()
			var got time.Duration
			for {
				actx, cancel := context.WithTimeout(ctx, 5*time.Second)
				_, err := c.Acquire(actx, freezeLease, "taker", ttl)
				cancel()
				if err == nil {
					got = time.Since(frozen)
					break
				}
				if !errors.Is(err, coord.ErrLeaseHeld) {
					got = time.Since(frozen)
					t.Errorf("freeze %d: taker got %v after %v", i, err, got)
					break
				}
				if time.Since(frozen) > 3*time.Second {
					got = time.Since(frozen)
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			worst = max(worst, got)
			if got > ttl+margin {
				t.Errorf("freeze %d: the taker got the lease %v after the freeze (TTL %v + margin %v)", i, got.Round(time.Millisecond), ttl, margin)
			}
			p.Signal(syscall.SIGCONT)
			p.Kill()
			// hand the lease back so the next holder starts at once
			l, err := c.Acquire(ctx, freezeLease, "taker", ttl)
			if err == nil {
				c.Release(ctx, l)
			}
		}
		t.Logf("%d freezes, slowest takeover %v (TTL %v)", freezes, worst.Round(time.Millisecond), ttl)
	})
}
