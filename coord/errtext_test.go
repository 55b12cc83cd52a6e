package coord_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/coord"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

// TestErrorsSayContextOnce: what an operator reads names the operation
// and the object once, and a held lease says who holds it until when.
func TestErrorsSayContextOnce(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		c := coord.New(env.DB)
		t.Run("lock held", func(t *testing.T) {
			holder, err := env.DB.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer holder.Rollback()
			if err := c.TryLock(ctx, holder, "stock:book"); err != nil {
				t.Fatal(err)
			}
			tx, err := env.DB.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			err = c.TryLock(ctx, tx, "stock:book")
			if !errors.Is(err, sqlcoord.ErrLocked) {
				t.Fatalf("second holder: %v", err)
			}
			if want := `coord: lock "stock:book": locked by another transaction`; err.Error() != want {
				t.Fatalf("got  %q\nwant %q", err.Error(), want)
			}
		})
		t.Run("lease held", func(t *testing.T) {
			a, err := c.Acquire(ctx, "leader:errtext", "owner-a", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Acquire(ctx, "leader:errtext", "owner-b", time.Minute)
			var held *coord.LeaseHeldError
			if !errors.As(err, &held) || !errors.Is(err, coord.ErrLeaseHeld) {
				t.Fatalf("second owner: %v (%T)", err, err)
			}
			if held.Holder != "owner-a" || !held.ExpiresAt.Equal(a.ExpiresAt) {
				t.Fatalf("held by %q until %v, want owner-a until %v", held.Holder, held.ExpiresAt, a.ExpiresAt)
			}
			msg := err.Error()
			if strings.Contains(msg, "transaction") || !strings.Contains(msg, `"owner-a"`) || !strings.Contains(msg, a.ExpiresAt.UTC().Format("2006-01-02T15:04:05")) {
				t.Fatalf("message %q: want the holder and expiry, no transaction", msg)
			}
		})
		t.Run("invalid name", func(t *testing.T) {
			tx, err := env.DB.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			err = c.TryLock(ctx, tx, "")
			if !errors.Is(err, coord.ErrInvalidName) || strings.Count(err.Error(), "coord:") != 1 {
				t.Fatalf("empty name: %v", err)
			}
		})
	})
}
