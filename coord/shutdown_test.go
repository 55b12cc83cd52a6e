package coord_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/coord"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

// helperKeeper holds a lease with KeepAlive under the process's
// SIGTERM context, as a service would, and exits once the keeper is done.
func helperKeeper(ctx context.Context, db *sqlcoord.DB) error {
	c := coord.New(db)
	l, err := c.Acquire(ctx, os.Getenv("LEASE"), "", time.Minute)
	if err != nil {
		return err
	}
	k, err := c.KeepAlive(ctx, l, coord.KeepAliveOptions{})
	if err != nil {
		return err
	}
	fmt.Println("HOLDING", l.Token)
	<-k.Done()
	return nil
}

// A service stopped with SIGTERM hands its lease back (the keeper
// releases it when its context ends): the restarted instance gets a new,
// larger token at once instead of waiting the one-minute TTL.
func TestKeeperReleasesOnShutdown(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		c := coord.New(env.DB)
		name := "service-leader"
		p := dbtest.Spawn(t, "keeper", "DSN="+env.DSN, "LEASE="+name)
		line := p.WaitLine(t, "HOLDING", 20*time.Second)
		old, _ := strconv.ParseInt(strings.Fields(line)[1], 10, 64)
		if _, err := c.Acquire(ctx, name, "restarted", time.Minute); !errors.Is(err, coord.ErrLeaseHeld) {
			t.Fatalf("while the first instance runs: %v, want ErrLeaseHeld", err)
		}
		p.Signal(syscall.SIGTERM)
		if !p.Wait(10 * time.Second) {
			t.Fatal("the instance did not exit after SIGTERM")
		}
		start := time.Now()
		l, err := c.Acquire(ctx, name, "restarted", time.Minute)
		if err != nil || l.Token <= old {
			t.Fatalf("after SIGTERM: %+v %v, want the lease at once with a token above %d", l, err, old)
		}
		t.Logf("restarted instance holds token %d (was %d) %v after the old one exited", l.Token, old, time.Since(start))
	})
}

// Stop keeps the lease (it expires after its TTL); Release hands it back.
func TestKeeperStopAndRelease(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		c := coord.New(env.DB)
		t.Run("stop keeps it", func(t *testing.T) {
			l, _ := c.Acquire(ctx, "stop-keeps", "a", time.Minute)
			k, err := c.KeepAlive(ctx, l, coord.KeepAliveOptions{})
			if err != nil {
				t.Fatal(err)
			}
			k.Stop()
			<-k.Done()
			if _, err := c.Acquire(ctx, "stop-keeps", "b", time.Minute); !errors.Is(err, coord.ErrLeaseHeld) {
				t.Fatalf("after Stop: %v, want ErrLeaseHeld", err)
			}
		})
		t.Run("release hands it back", func(t *testing.T) {
			l, _ := c.Acquire(ctx, "release", "a", time.Minute)
			k, err := c.KeepAlive(ctx, l, coord.KeepAliveOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if err := k.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if b, err := c.Acquire(ctx, "release", "b", time.Minute); err != nil || b.Token <= l.Token {
				t.Fatalf("after Release: %+v %v", b, err)
			}
		})
		t.Run("context end releases", func(t *testing.T) {
			l, _ := c.Acquire(ctx, "ctx-end", "a", time.Minute)
			kctx, cancel := context.WithCancel(ctx)
			k, err := c.KeepAlive(kctx, l, coord.KeepAliveOptions{})
			if err != nil {
				t.Fatal(err)
			}
			cancel()
			<-k.Done()
			if b, err := c.Acquire(ctx, "ctx-end", "b", time.Minute); err != nil || b.Token <= l.Token {
				t.Fatalf("after the context ended: %+v %v", b, err)
			}
		})
	})
}

// MaxHold: the keeper gives the lease up after it, even while renewals
// succeed, and the next owner gets it at once.
func TestKeeperMaxHold(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		c := coord.New(env.DB)
		l, err := c.Acquire(ctx, "bounded", "a", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		k, err := c.KeepAlive(ctx, l, coord.KeepAliveOptions{MaxHold: 300 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		<-k.Context().Done()
		if cause := context.Cause(k.Context()); !errors.Is(cause, coord.ErrMaxHold) {
			t.Fatalf("cause %v, want ErrMaxHold", cause)
		}
		<-k.Done()
		if held := time.Since(start); held < 300*time.Millisecond || held > 5*time.Second {
			t.Errorf("held %v", held)
		}
		if b, err := c.Acquire(ctx, "bounded", "b", time.Minute); err != nil || b.Token <= l.Token {
			t.Fatalf("after MaxHold: %+v %v", b, err)
		}
		if _, err := c.KeepAlive(ctx, l, coord.KeepAliveOptions{MaxHold: -time.Second}); !errors.Is(err, coord.ErrInvalidTTL) {
			t.Errorf("negative MaxHold: %v", err)
		}
	})
}
