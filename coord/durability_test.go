package coord_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/coord"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

// On PostgreSQL an Acquire waits for its WAL flush and a
// Release does not (a lost release only makes the next holder wait out
// the TTL). Counted on a server of its own with fsync on: the WAL syncs
// of 100 acquires, one after another, then of their 100 releases.
func TestAcquireFlushedReleaseNot(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server")
	}
	ctx := context.Background()
	var err error
	db := dbtest.PrivatePostgres(t, "flushes", sqlcoord.Options{MaxOpenConns: 1}, "-c", "fsync=on", "-c", "synchronous_commit=on")
	syncs := func() int64 {
		t.Helper()
		// this backend's counts reach pg_stat_wal at its next flush
		if _, err := db.ExecContext(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
			t.Fatal(err)
		}
		var n int64
		if err := db.QueryRowContext(ctx, `SELECT wal_sync FROM pg_stat_wal`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	c := coord.New(db)
	const n = 100
	leases := make([]coord.Lease, n)
	before := syncs()
	for i := range leases {
		if leases[i], err = c.Acquire(ctx, fmt.Sprint("flush-", i), "", time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	acquired := syncs()
	for _, l := range leases {
		if err := c.Release(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	released := syncs()
	t.Logf("WAL syncs: %d for %d acquires, %d for their releases", acquired-before, n, released-acquired)
	if acquired-before < n*9/10 {
		t.Errorf("%d acquires waited for %d WAL syncs: an acquire must reach disk before it returns", n, acquired-before)
	}
	if released-acquired > n/4 {
		t.Errorf("%d releases caused %d WAL syncs: a release need not wait for one", n, released-acquired)
	}
}
