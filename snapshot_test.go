package sqlcoord_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/coord"
	"github.com/sqlcoord/sqlcoord/coord/ids"
	"github.com/sqlcoord/sqlcoord/migrate"
	"github.com/sqlcoord/sqlcoord/outbox"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/localdb"
	"github.com/sqlcoord/sqlcoord/txn"
)

// A database restored from a disk snapshot in place of the
// server it was taken from — same address, same system identifier and
// timeline (PostgreSQL), same server id (MariaDB) — while clients keep
// their pools and DSN. Clients in goroutines and in two other OS processes
// take leases and fence with their tokens, fetch segment ids and enqueue
// outbox messages before the snapshot, after it (the tail the restore
// loses) and after the restore. What the user relies on:
//
//   - no fencing token of a lease is handed to two owners, and none handed
//     out after the restore is at or below one handed out before the crash
//     (also to a client that never saw the lost tail);
//   - no segment id is issued twice;
//   - a zombie holding a token from the lost tail is refused by the row it
//     protects (coord.Fence, coord.Update), at every isolation level, both
//     as the first writer on the restored server and later;
//   - no outbox message id (the UUID consumers dedupe on) is reused.

// snapEvent is one value a snapshot worker was issued.
type snapEvent struct {
	Kind   string `json:"k"` // "token", "id", "msg"
	Lease  string `json:"lease,omitempty"`
	Owner  string `json:"owner,omitempty"`
	Value  int64  `json:"v"`
	UUID   string `json:"uuid,omitempty"`
	Start  int64  `json:"start"` // unix ns when the call began
	Finish int64  `json:"finish"`
}

const snapLeases = 3

// snapWork issues values on db until ctx ends, reporting each to out;
// errors (the server is down, restarting) are retried after a pause.
func snapWork(ctx context.Context, db *sqlcoord.DB, name string, out func(snapEvent)) error {
	c := coord.New(db)
	ob := outbox.New(db)
	seg, err := ids.NewSegments(db, "snap-ids", ids.SegmentOptions{Step: 10, MinStep: 10, MaxStep: 10, Prefetch: 1, AutoCreate: true})
	if err != nil {
		return err
	}
	pause := func() {
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
	for i := 0; ctx.Err() == nil; i++ {
		lease := fmt.Sprintf("snap-lease-%d", i%snapLeases)
		start := time.Now().UnixNano()
		l, err := c.Acquire(ctx, lease, name, 500*time.Millisecond)
		if err != nil {
			pause()
			continue
		}
		out(snapEvent{Kind: "token", Lease: lease, Owner: name, Value: l.Token, Start: start, Finish: time.Now().UnixNano()})
		_ = txn.Do(ctx, db, txn.Options{MaxAttempts: 1}, func(ctx context.Context, tx *sql.Tx) error {
			return c.Fence(ctx, tx, "snap-res-"+lease, l.Token)
		})
		_ = c.Release(ctx, l)

		start = time.Now().UnixNano()
		if id, err := seg.Next(ctx); err == nil {
			out(snapEvent{Kind: "id", Value: id, Start: start, Finish: time.Now().UnixNano()})
		}

		var rowID int64
		msgID := ""
		start = time.Now().UnixNano()
		err = txn.Do(ctx, db, txn.Options{MaxAttempts: 1}, func(ctx context.Context, tx *sql.Tx) error {
			m := outbox.Msg{Topic: "snap", Payload: []byte(name)}
			v, err := uuid.NewV7()
			if err != nil {
				return err
			}
			u := v.String()
			m.ID = u
			if err := ob.Enqueue(ctx, tx, m); err != nil {
				return err
			}
			msgID = u
			return tx.QueryRowContext(ctx, db.Rebind(`SELECT id FROM coord_outbox WHERE msg_id = ?`), u).Scan(&rowID)
		})
		if err == nil {
			out(snapEvent{Kind: "msg", Value: rowID, UUID: msgID, Start: start, Finish: time.Now().UnixNano()})
		}
	}
	return nil
}

// runSnapWorker is the snapshot worker as a helper process: one JSON line
// per value issued.
func runSnapWorker(ctx context.Context, db *sqlcoord.DB) error {
	var mu sync.Mutex
	enc := json.NewEncoder(os.Stdout)
	fmt.Println("ready")
	return snapWork(ctx, db, os.Getenv("SNAP_NAME"), func(e snapEvent) {
		mu.Lock()
		enc.Encode(e)
		mu.Unlock()
	})
}

func TestSnapshotRestore(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ family, how string }{
		{"postgres", localdb.SnapshotBaseBackup},
		{"postgres", localdb.SnapshotFrozen},
		{"postgres", localdb.SnapshotCold},
		{"mysql", localdb.SnapshotFrozen},
		{"mysql", localdb.SnapshotCold},
	} {
		t.Run(c.family+"/"+c.how, func(t *testing.T) {
			t.Parallel()
			snapshotRestore(t, c.family, c.how)
		})
	}
}

func snapshotRestore(t *testing.T, family, how string) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var srv *localdb.Server
	var err error
	if family == "postgres" {
		srv, err = localdb.StartPostgres(ctx)
	} else {
		srv, err = localdb.StartMariaDB(ctx)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	dsn, err := srv.CreateDatabase(ctx, "sqlcoord_snapshot")
	if err != nil {
		t.Fatal(err)
	}
	admin := openForkClient(t, dsn)
	if err := migrate.Migrate(ctx, admin.db, migrate.Up); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.db.ExecContext(ctx, `CREATE TABLE snap_rows (id int PRIMARY KEY, fence bigint NOT NULL, v int NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.db.ExecContext(ctx, `INSERT INTO snap_rows VALUES (1, 0, 0)`); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var events []snapEvent
	record := func(e snapEvent) { mu.Lock(); events = append(events, e); mu.Unlock() }
	work, stopWork := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ { // goroutines, each a pool of its own
		db := openForkClient(t, dsn).db
		wg.Add(1)
		go func() {
			defer wg.Done()
			snapWork(work, db, fmt.Sprintf("g%d", i), record)
		}()
	}
	var procs []*dbtest.Proc
	for i := 0; i < 2; i++ { // OS processes
		p := dbtest.Spawn(t, "snap-worker", "DSN="+dsn, fmt.Sprintf("SNAP_NAME=p%d", i))
		procs = append(procs, p)
		p.WaitLine(t, "ready", 30*time.Second)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for l := range p.Lines {
				var e snapEvent
				if json.Unmarshal([]byte(l), &e) == nil && e.Kind != "" {
					record(e)
				}
			}
		}()
		defer p.Kill()
	}
	time.Sleep(1500 * time.Millisecond)

	snap, err := srv.Snapshot(ctx, how)
	if err != nil {
		t.Fatal(err)
	}
	// The tail the restore loses: more of the same, and a zombie's lease,
	// fenced on its resource and on a row of the application's.
	time.Sleep(1500 * time.Millisecond)
	zc := openForkClient(t, dsn)
	zl, err := zc.c.Acquire(ctx, "snap-zombie", "zombie", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := zc.fenceOn(ctx, "snap-zombie-res", zl.Token); err != nil {
		t.Fatal(err)
	}
	zombieUpdate := func(iso sql.IsolationLevel) error {
		return txn.Do(ctx, zc.db, txn.Options{Isolation: iso}, func(ctx context.Context, tx *sql.Tx) error {
			return zc.c.Update(ctx, tx, coord.FencedUpdate{Table: "snap_rows", KeyColumn: "id", Key: 1, FenceColumn: "fence",
				Token: zl.Token, Set: map[string]any{"v": 1}})
		})
	}
	if err := zombieUpdate(sql.LevelReadCommitted); err != nil {
		t.Fatal(err)
	}
	crash := time.Now().UnixNano()
	if err := srv.RestoreSnapshot(ctx, snap); err != nil {
		t.Fatal(err)
	}
	restored := time.Now().UnixNano()

	// The zombie writes first (its connections are gone; the pool dials
	// again), at READ COMMITTED on coord_fences and at SERIALIZABLE on
	// its own row; later at REPEATABLE READ.
	zombieFence := func(iso sql.IsolationLevel) error {
		var err error
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			err = txn.Do(ctx, zc.db, txn.Options{Isolation: iso}, func(ctx context.Context, tx *sql.Tx) error {
				return zc.c.Fence(ctx, tx, "snap-zombie-res", zl.Token)
			})
			if err == nil || errors.Is(err, coord.ErrStaleToken) || errors.Is(err, sqlcoord.ErrStalePrimary) {
				return err
			}
		}
		return err
	}
	refused := func(what string, err error) {
		if !errors.Is(err, coord.ErrStaleToken) && !errors.Is(err, sqlcoord.ErrStalePrimary) {
			t.Errorf("zombie (token %d from the lost tail) %s on the restored server: %v, want ErrStaleToken or ErrStalePrimary", zl.Token, what, err)
		}
	}
	refused("fence, first writer", zombieFence(sql.LevelReadCommitted))
	refused("fenced update", zombieUpdate(sql.LevelSerializable))

	// A client that never saw the lost tail.
	fresh := openForkClient(t, dsn)
	for i := 0; i < snapLeases; i++ {
		lease := fmt.Sprintf("snap-lease-%d", i)
		start := time.Now().UnixNano()
		var l coord.Lease
		err := retry(ctx, func() (err error) {
			l, err = fresh.c.Acquire(ctx, lease, "fresh", time.Minute)
			if errors.Is(err, coord.ErrLeaseHeld) {
				time.Sleep(100 * time.Millisecond)
				err = sqlcoord.ErrConnLost // held by a worker: try again
			}
			return err
		})
		if err != nil {
			t.Fatalf("fresh client: %v", err)
		}
		record(snapEvent{Kind: "token", Lease: lease, Owner: "fresh", Value: l.Token, Start: start, Finish: time.Now().UnixNano()})
		fresh.c.Release(ctx, l)
	}
	time.Sleep(1500 * time.Millisecond)
	refused("fence, later, at REPEATABLE READ", zombieFence(sql.LevelRepeatableRead))
	stopWork()
	for _, p := range procs {
		p.Signal(syscall.SIGTERM)
	}
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	var before, after, lostTail int
	owners := map[string]string{} // lease/token → owner
	var twice []string
	var maxBefore, minAfter int64 = 0, 1<<63 - 1
	idsSeen := map[int64]bool{}
	var idsTwice []int64
	uuids := map[string]bool{}
	rowIDs := map[int64]string{}
	var rowIDsReused int
	for _, e := range events {
		switch e.Kind {
		case "token":
			k := fmt.Sprintf("%s/%d", e.Lease, e.Value)
			if o, ok := owners[k]; ok && o != e.Owner {
				twice = append(twice, fmt.Sprintf("%s to %s and %s", k, o, e.Owner))
			}
			owners[k] = e.Owner
			if e.Finish < crash {
				before++
				maxBefore = max(maxBefore, e.Value)
			}
			if e.Start > restored {
				after++
				minAfter = min(minAfter, e.Value)
			}
		case "id":
			if idsSeen[e.Value] {
				idsTwice = append(idsTwice, e.Value)
			}
			idsSeen[e.Value] = true
		case "msg":
			if uuids[e.UUID] {
				t.Errorf("outbox message id %s issued twice", e.UUID)
			}
			uuids[e.UUID] = true
			if u, ok := rowIDs[e.Value]; ok && u != e.UUID {
				rowIDsReused++
			}
			rowIDs[e.Value] = e.UUID
		}
		if e.Finish < crash && e.Start > crash-int64(1500*time.Millisecond) {
			lostTail++
		}
	}
	t.Logf("%s snapshot: %d tokens before the crash, %d after the restore (lowest %d, highest before %d); %d ids; %d messages (%d row ids reused: the ordering column, not the message id)",
		how, before, after, minAfter, maxBefore, len(idsSeen), len(uuids), rowIDsReused)
	if before == 0 || after == 0 || lostTail == 0 {
		t.Fatalf("the workers issued %d tokens before the crash (%d values in the lost tail) and %d after the restore: nothing to judge", before, lostTail, after)
	}
	if len(twice) > 0 {
		t.Errorf("%d tokens handed to two owners, e.g. %s", len(twice), twice[0])
	}
	if minAfter <= maxBefore {
		t.Errorf("a token handed out after the restore (%d) is not above one handed out before the crash (%d)", minAfter, maxBefore)
	}
	if len(idsTwice) > 0 {
		t.Errorf("%d segment ids issued twice, e.g. %d", len(idsTwice), idsTwice[0])
	}
	forks, err := sqlcoord.Forks(ctx, admin.db)
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, f := range forks {
		found = found || (f.Current && strings.Contains(f.Reason, "restart"))
	}
	if !found {
		t.Errorf("no current fork records the restart: %+v", forks)
	}
}
