package sqlcoord_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord/coord"
	"github.com/sqlcoord/sqlcoord/migrate"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

// A promotion that loses acknowledged terms never hands a term
// out twice. B is elected while replication stalls (its term and fenced
// write exist only on the old primary); the standby is promoted without
// them. The next leader's term is above B's, B's late fenced write and
// its Proclaim are refused by the promoted server, and an observer on
// the new primary sees the new term.
func TestElectionThroughFailover(t *testing.T) {
	t.Parallel()
	cl := dbtest.NewPGCluster(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := newFailoverWorld(t, cl.DSN())
	if err := migrate.Migrate(ctx, w.db, migrate.Up); err != nil {
		t.Fatal(err)
	}
	elect := func(id string, ttl time.Duration) *coord.Election[*sql.Tx] {
		e, err := w.c.Election("failover", coord.ElectionOptions{ID: id, TTL: ttl})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	la, err := elect("A", 200*time.Millisecond).Campaign(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.fence(ctx, la.Term()); err != nil {
		t.Fatal(err)
	}
	la.Resign(ctx)
	cl.WaitCaughtUp(t)

	cl.Link.SetStalled(true)
	lb, err := elect("B", time.Minute).Campaign(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.fence(ctx, lb.Term()); err != nil {
		t.Fatal(err)
	}
	t.Logf("acknowledged on the old primary only: term %d (A had %d)", lb.Term(), la.Term())
	cl.Failover(t)

	// Each try is bounded (the first ones may meet the old primary), but
	// the won leadership lives on ctx: Campaign's context ending resigns
	// it.
	var lc *coord.Leadership
	for lc == nil {
		cctx, ccancel := context.WithCancel(ctx)
		bound := time.AfterFunc(5*time.Second, ccancel)
		l, err := elect("C", time.Minute).Campaign(cctx, "c")
		if err == nil && bound.Stop() {
			lc = l
			break
		}
		ccancel()
		if ctx.Err() != nil {
			t.Fatalf("C never elected on the promoted server: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	defer lc.Resign(context.Background())
	if lc.Term() <= lb.Term() {
		t.Fatalf("term %d on the promoted server reissues B's %d", lc.Term(), lb.Term())
	}
	if err := w.fence(ctx, lb.Term()); err == nil {
		t.Fatalf("B's fenced write with term %d accepted after the promotion", lb.Term())
	}
	if err := w.fence(ctx, lc.Term()); err != nil {
		t.Fatalf("C's fenced write: %v", err)
	}
	if err := lb.Proclaim(ctx, "still b"); !errors.Is(err, coord.ErrNotLeader) {
		t.Fatalf("B's Proclaim after the promotion: %v, want ErrNotLeader", err)
	}
	got, err := elect("watcher", time.Second).Leader(ctx)
	if err != nil || got.ID != "C" || got.Term != lc.Term() || got.Value != "c" {
		t.Fatalf("leader on the promoted server: %+v %v", got, err)
	}
	octx, stop := context.WithTimeout(ctx, 10*time.Second)
	defer stop()
	ch, err := elect("watcher", time.Second).Observe(octx)
	if err != nil {
		t.Fatal(err)
	}
	for l := range ch {
		if l.Term == lc.Term() && l.Live {
			t.Logf("terms: A %d, B %d (lost), C %d", la.Term(), lb.Term(), lc.Term())
			return
		}
	}
	t.Fatal("the observer on the promoted server never saw C's term")
}
