package sqlcoord_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord/migrate"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/coord"
	"github.com/sqlcoord/sqlcoord/coord/ids"
	"github.com/sqlcoord/sqlcoord/coord/jobs"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/localdb"
	"github.com/sqlcoord/sqlcoord/txn"
)

// Counters that never go backwards on any fork of a database's
// history — two promotions in a row without re-pointing, a split brain, a
// restore from a dump, a point-in-time recovery. On each history the same
// work is done; what a later history issues must be above everything an
// earlier one issued (tokens, segment ids, job attempts), and a stale
// holder's fenced write must be refused once a newer holder wrote.

const (
	fkLease = "fork-lease"
	fkRes   = "fork-resource"
	fkTag   = "fork-ids"
	fkJob   = "fork-job"
)

// history is what one history of the database issued.
type history struct {
	name     string
	tokens   []int64
	ids      []int64
	attempts []int64 // of fkJob's slot at fkFire
}

var fkFire = time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)

// forkClient is one client process: a pool, its coord client and runs.
type forkClient struct {
	t    *testing.T
	db   *sqlcoord.DB
	c    *coord.Client[*sql.Tx]
	runs *jobs.Runs
}

func openForkClient(t *testing.T, dsn string, opts ...sqlcoord.Options) *forkClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	o := sqlcoord.Options{MaxOpenConns: 4}
	if len(opts) > 0 {
		o = opts[0]
	}
	db, err := sqlcoord.Open(ctx, dsn, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return &forkClient{t: t, db: db, c: coord.New(db), runs: jobs.NewRuns(db)}
}

// retry runs op until it succeeds, fails otherwise than by a lost
// connection (a failover cuts them), or 20 s pass.
func retry(ctx context.Context, op func() error) error {
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := op()
		if err == nil || time.Now().After(deadline) || !(errors.Is(err, sqlcoord.ErrConnLost) || errors.Is(err, sqlcoord.ErrCommitUnknown) ||
			errors.Is(err, sqlcoord.ErrReadOnly) || errors.Is(err, sqlcoord.ErrUnreachable) || strings.Contains(err.Error(), "connect")) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// work does one history's share: n lease grants (each fenced, then
// released), one segment, and a claim or takeover of the job's slot.
func (f *forkClient) work(ctx context.Context, h *history, n int) error {
	for i := 0; i < n; i++ {
		var l coord.Lease
		if err := retry(ctx, func() (err error) {
			l, err = f.c.Acquire(ctx, fkLease, fmt.Sprintf("%s-%d", h.name, i), time.Minute)
			return err
		}); err != nil {
			return fmt.Errorf("%s acquire: %w", h.name, err)
		}
		h.tokens = append(h.tokens, l.Token)
		if err := f.fence(ctx, l.Token); err != nil {
			return fmt.Errorf("%s fence %d: %w", h.name, l.Token, err)
		}
		if err := f.c.Release(ctx, l); err != nil {
			return fmt.Errorf("%s release: %w", h.name, err)
		}
	}
	seg, err := ids.NewSegments(f.db, fkTag, ids.SegmentOptions{Step: 10, MinStep: 10, MaxStep: 10, Prefetch: 1, AutoCreate: true})
	if err != nil {
		return err
	}
	for i := 0; i < 10; i++ {
		id, err := seg.Next(ctx)
		if err != nil {
			return fmt.Errorf("%s ids: %w", h.name, err)
		}
		h.ids = append(h.ids, id)
	}
	run, err := f.runs.Claim(ctx, fkJob, fkFire, 0, 1, h.name)
	if errors.Is(err, jobs.ErrAlreadyClaimed) {
		err = nil
		var won []jobs.Run
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && len(won) == 0 && err == nil; {
			time.Sleep(20 * time.Millisecond) // the heartbeat must be older than the grace
			won, err = f.runs.TakeOver(ctx, fkJob, 10*time.Millisecond, h.name)
		}
		if err == nil && len(won) != 1 {
			err = fmt.Errorf("no takeover of the slot")
		}
		if err == nil {
			run = won[0]
		}
	}
	if err != nil {
		return fmt.Errorf("%s job: %w", h.name, err)
	}
	h.attempts = append(h.attempts, int64(run.Attempt))
	return nil
}

func (f *forkClient) fence(ctx context.Context, token int64) error {
	return f.fenceOn(ctx, fkRes, token)
}

func (f *forkClient) fenceOn(ctx context.Context, resource string, token int64) error {
	return txn.Do(ctx, f.db, txn.Options{MaxAttempts: 1}, func(ctx context.Context, tx *sql.Tx) error {
		return f.c.Fence(ctx, tx, resource, token)
	})
}

// above fails the test unless every value later issued is above every
// value the earlier histories issued.
func above(t *testing.T, later history, earlier ...history) {
	t.Helper()
	for _, e := range earlier {
		for what, pair := range map[string][2][]int64{"token": {later.tokens, e.tokens}, "segment id": {later.ids, e.ids}, "job attempt": {later.attempts, e.attempts}} {
			l, r := pair[0], pair[1]
			if len(l) == 0 || len(r) == 0 {
				continue
			}
			lmin, rmax := minOf(l), maxOf(r)
			if lmin <= rmax {
				t.Errorf("%s issued %s %d, not above %s's %d: issued twice or backwards (%s: %v; %s: %v)",
					later.name, what, lmin, e.name, rmax, later.name, l, e.name, r)
			}
		}
	}
}

func minOf(v []int64) int64 {
	s := append([]int64(nil), v...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[0]
}
func maxOf(v []int64) int64 {
	s := append([]int64(nil), v...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)-1]
}

// zombie holds a lease granted on one history; after a newer holder
// fenced on another, the zombie's fenced write there must be refused.
func zombieRefused(t *testing.T, ctx context.Context, f *forkClient, zombieToken int64) {
	t.Helper()
	l, err := f.c.Acquire(ctx, fkLease+"-z", "new-holder", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if l.Token <= zombieToken {
		t.Errorf("the new holder got token %d, not above the zombie's %d", l.Token, zombieToken)
	}
	if err := f.fenceOn(ctx, fkRes+"-z", l.Token); err != nil {
		t.Fatal(err)
	}
	if err := f.fenceOn(ctx, fkRes+"-z", zombieToken); !errors.Is(err, coord.ErrStaleToken) {
		t.Errorf("zombie write with token %d after token %d: %v, want ErrStaleToken", zombieToken, l.Token, err)
	}
}

func TestForkTwoPromotionsWithoutRepointing(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rs := dbtest.NewPGReplicaSet(t, 2)
	f := openForkClient(t, rs.DSN())
	if err := migrate.Migrate(ctx, f.db, migrate.Up); err != nil {
		t.Fatal(err)
	}
	p := history{name: "P"}
	if err := f.work(ctx, &p, 5); err != nil {
		t.Fatal(err)
	}
	rs.WaitCaughtUp(t, 0, 1)
	rs.WaitCaughtUp(t, 0, 2)

	// P dies; S1 is promoted; S2 is never re-pointed at S1.
	rs.Crash(0)
	rs.Promote(t, 1)
	rs.Point(1)
	s1 := history{name: "S1"}
	if err := f.work(ctx, &s1, 20); err != nil {
		t.Fatal(err)
	}
	zl, err := f.c.Acquire(ctx, fkLease+"-z", "zombie", time.Minute) // the zombie: S1's holder, paused through the next failover
	if err != nil {
		t.Fatal(err)
	}
	if err := f.c.Release(ctx, zl); err != nil {
		t.Fatal(err)
	}
	s1.tokens = append(s1.tokens, zl.Token)

	// S1 dies too; S2, which has P's history only, is promoted.
	rs.Crash(1)
	rs.Promote(t, 2)
	rs.Point(2)
	s2 := history{name: "S2"}
	if err := f.work(ctx, &s2, 20); err != nil {
		t.Fatal(err)
	}
	t.Logf("tokens: P %v, S1 %d..%d, S2 %d..%d", p.tokens, minOf(s1.tokens), maxOf(s1.tokens), minOf(s2.tokens), maxOf(s2.tokens))
	t.Run("S1 issued above P", func(t *testing.T) { above(t, s1, p) })
	t.Run("S2 issued above S1 and P, whose rows it never saw", func(t *testing.T) { above(t, s2, s1, p) })
	t.Run("S1's paused holder refused on S2 after S2's holder wrote", func(t *testing.T) { zombieRefused(t, ctx, f, zl.Token) })
}

func TestForkSplitBrain(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rs := dbtest.NewPGReplicaSet(t, 1)
	file := filepath.Join(t.TempDir(), "epoch")
	a := openForkClient(t, rs.DSN(), sqlcoord.Options{MaxOpenConns: 4, EpochFile: file})
	if err := migrate.Migrate(ctx, a.db, migrate.Up); err != nil {
		t.Fatal(err)
	}
	seen := history{name: "A"} // every token client A was granted, in order
	if err := a.work(ctx, &seen, 3); err != nil {
		t.Fatal(err)
	}
	rs.WaitCaughtUp(t, 0, 1)

	// The standby is promoted while the old primary stays up, isolated
	// but alive; clients follow the floating address back and forth.
	rs.Promote(t, 1)
	rs.Point(1)
	if err := a.work(ctx, &seen, 3); err != nil {
		t.Fatal(err)
	}
	newEpoch := a.db.Epochs().Seen()
	if newEpoch == 0 {
		t.Fatal("client A has not seen the promoted server's new epoch")
	}
	rs.Point(0) // back to the old primary

	t.Run("a client that saw the new primary refuses the old one", func(t *testing.T) {
		err := retry(ctx, func() error { _, err := a.c.Acquire(ctx, fkLease, "A-on-old", time.Minute); return err })
		if !errors.Is(err, sqlcoord.ErrStalePrimary) {
			t.Fatalf("Acquire on the old primary: %v, want ErrStalePrimary", err)
		}
		t.Logf("%v", err)
		if err := a.fence(ctx, maxOf(seen.tokens)); !errors.Is(err, sqlcoord.ErrStalePrimary) {
			t.Errorf("Fence on the old primary: %v, want ErrStalePrimary", err)
		}
		seg, err := ids.NewSegments(a.db, fkTag, ids.SegmentOptions{Step: 10, MinStep: 10, MaxStep: 10})
		if err == nil {
			_, err = seg.Next(ctx)
		}
		if !errors.Is(err, sqlcoord.ErrStalePrimary) {
			t.Errorf("segment on the old primary: %v, want ErrStalePrimary", err)
		}
		if _, err := a.runs.Claim(ctx, fkJob, fkFire.Add(time.Hour), 0, 1, "A"); !errors.Is(err, sqlcoord.ErrStalePrimary) {
			t.Errorf("job claim on the old primary: %v, want ErrStalePrimary", err)
		}
	})
	t.Run("a restarted client remembers the epoch in its file", func(t *testing.T) {
		_, err := sqlcoord.Open(ctx, rs.DSN(), sqlcoord.Options{EpochFile: file})
		if !errors.Is(err, sqlcoord.ErrStalePrimary) {
			t.Fatalf("Open on the old primary with the epoch file: %v, want ErrStalePrimary", err)
		}
	})
	// A client that never saw the new primary cannot know: it works on
	// the old one (documented), with tokens below the new primary's.
	b := openForkClient(t, rs.DSN())
	old := history{name: "B on the old primary"}
	if err := b.work(ctx, &old, 2); err != nil {
		t.Fatal(err)
	}
	rs.Point(1) // and forward again
	if err := a.work(ctx, &seen, 3); err != nil {
		t.Fatal(err)
	}
	t.Run("tokens a client saw never went backwards", func(t *testing.T) {
		for i := 1; i < len(seen.tokens); i++ {
			if seen.tokens[i] <= seen.tokens[i-1] {
				t.Fatalf("client A was granted token %d after %d: %v", seen.tokens[i], seen.tokens[i-1], seen.tokens)
			}
		}
	})
	t.Run("the old primary's holder is refused on the new one", func(t *testing.T) {
		if err := retry(ctx, func() error { return b.fence(ctx, maxOf(old.tokens)) }); !errors.Is(err, coord.ErrStaleToken) {
			t.Errorf("a token granted on the old primary after the split (%d) wrote on the new one (fence %d): %v, want ErrStaleToken",
				maxOf(old.tokens), maxOf(seen.tokens), err)
		}
		if b.db.Epochs().Seen() != 0 {
			// b learns the new epoch with its first counter there
			t.Logf("b's mark %d", b.db.Epochs().Seen())
		}
	})
}

// workAroundDump installs the schema in database name of src (reached at
// dsn), works, dumps the database, and works again: what the dump has and
// what a restore of it loses.
func workAroundDump(t *testing.T, ctx context.Context, src *localdb.Server, name, dsn string) (f *forkClient, dump string, before, lost history) {
	t.Helper()
	f = openForkClient(t, dsn)
	if err := migrate.Migrate(ctx, f.db, migrate.Up); err != nil {
		t.Fatal(err)
	}
	before = history{name: "before the dump"}
	if err := f.work(ctx, &before, 3); err != nil {
		t.Fatal(err)
	}
	dump, err := src.Dump(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	lost = history{name: "after the dump (lost)"}
	if err := f.work(ctx, &lost, 5); err != nil {
		t.Fatal(err)
	}
	return f, dump, before, lost
}

func TestForkRestoreFromDump(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	src, err := localdb.StartPostgres(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Stop()
	const name = "sqlcoord_restore"
	if _, err := src.CreateDatabase(ctx, name); err != nil {
		t.Fatal(err)
	}
	front := dbtest.NewProxy(t, fmt.Sprintf("%s:%d", src.Host, src.Port))
	dsn := strings.Replace(src.DSN(name), fmt.Sprintf("%s:%d", src.Host, src.Port), front.Addr, 1)
	f, dump, before, lost := workAroundDump(t, ctx, src, name, dsn)
	// The server is lost; the dump is restored into a new cluster.
	dst, err := localdb.StartPostgres(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Stop()
	if err := src.Restore(ctx, dump, name, dst); err != nil {
		t.Fatal(err)
	}
	src.Crash()
	front.SetTarget(fmt.Sprintf("%s:%d", dst.Host, dst.Port))
	front.CutAll()
	restored := history{name: "restored"}
	if err := f.work(ctx, &restored, 5); err != nil {
		t.Fatal(err)
	}
	above(t, restored, lost, before)
}

func TestForkPointInTimeRecovery(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	src, err := localdb.StartArchiving(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Stop()
	const name = "sqlcoord_pitr"
	if _, err := src.CreateDatabase(ctx, name); err != nil {
		t.Fatal(err)
	}
	front := dbtest.NewProxy(t, fmt.Sprintf("%s:%d", src.Host, src.Port))
	dsn := strings.Replace(src.DSN(name), fmt.Sprintf("%s:%d", src.Host, src.Port), front.Addr, 1)
	f := openForkClient(t, dsn)
	if err := migrate.Migrate(ctx, f.db, migrate.Up); err != nil {
		t.Fatal(err)
	}
	backup, err := src.BaseBackup(ctx)
	if err != nil {
		t.Fatal(err)
	}
	before := history{name: "before the restore point"}
	if err := f.work(ctx, &before, 3); err != nil {
		t.Fatal(err)
	}
	admin, err := src.Admin()
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.ExecContext(ctx, `SELECT pg_create_restore_point('sqlcoord-rp')`); err != nil {
		t.Fatal(err)
	}
	lost := history{name: "after the restore point (lost)"}
	if err := f.work(ctx, &lost, 5); err != nil {
		t.Fatal(err)
	}
	var seg string // archive the segment with the restore point
	if err := admin.QueryRowContext(ctx, `SELECT pg_walfile_name(pg_switch_wal())`).Scan(&seg); err != nil {
		t.Fatal(err)
	}
	waitArchived(t, ctx, admin, seg)
	src.Crash()
	dst, err := localdb.StartRecovered(ctx, src, backup, "sqlcoord-rp")
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Stop()
	waitPromoted(t, ctx, dst)
	front.SetTarget(fmt.Sprintf("%s:%d", dst.Host, dst.Port))
	front.CutAll()
	recovered := history{name: "recovered"}
	if err := f.work(ctx, &recovered, 5); err != nil {
		t.Fatal(err)
	}
	above(t, recovered, lost, before)
}

// waitArchived waits until the server has archived WAL segment seg.
func waitArchived(t *testing.T, ctx context.Context, admin *sql.DB, seg string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		var done bool
		err := admin.QueryRowContext(ctx, `SELECT COALESCE(last_archived_wal >= $1, false) FROM pg_stat_archiver`, seg).Scan(&done)
		if err == nil && done {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("WAL not archived within 30 s")
}

// waitPromoted waits until a recovering server has reached its target and
// accepts writes.
func waitPromoted(t *testing.T, ctx context.Context, s *localdb.Server) {
	t.Helper()
	db, err := s.Admin()
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); {
		var rec bool
		if err := db.QueryRowContext(ctx, `SELECT pg_is_in_recovery()`).Scan(&rec); err == nil && !rec {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("the recovered server did not promote within 60 s")
}

// A dump restored into another database of the same cluster: same system
// identifier, timeline and server run, but coord_forks is a new table (its
// rows name the dumped one's oid), so the restored database starts a new
// epoch — also for a client that never saw the lost tail.
func TestForkRestoreFromDumpSameCluster(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	src, err := localdb.StartPostgres(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Stop()
	const name = "sqlcoord_restore_src"
	dsn, err := src.CreateDatabase(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	_, dump, before, lost := workAroundDump(t, ctx, src, name, dsn)
	const copyName = "sqlcoord_restore_dst"
	if err := src.Restore(ctx, dump, copyName, src); err != nil {
		t.Fatal(err)
	}
	g := openForkClient(t, src.DSN(copyName))
	restored := history{name: "restored"}
	if err := g.work(ctx, &restored, 5); err != nil {
		t.Fatal(err)
	}
	above(t, restored, lost, before)
	forks, err := sqlcoord.Forks(ctx, g.db)
	if err != nil {
		t.Fatal(err)
	}
	if last := forks[len(forks)-1]; !last.Current || !strings.Contains(last.Reason, "dump") {
		t.Errorf("the newest fork is %+v, want the current one recorded for a restored dump", last)
	}
}
