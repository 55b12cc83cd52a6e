package pgstream_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/migrate"
	"github.com/sqlcoord/sqlcoord/outbox"
	"github.com/sqlcoord/sqlcoord/outbox/pgstream"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
	"github.com/sqlcoord/sqlcoord/txn"
)

// runStreamRelay is a streaming relay process whose publisher is a
// consumer in the same database: it logs every delivery, then applies the
// message's effect once through an Inbox. With FAULTS=1 the publisher
// fails before acting (5 %), hangs past the publish timeout (0.5 %), or
// acts and loses its answer (2 %: a duplicate without a crash).
func runStreamRelay(ctx context.Context, db *sqlcoord.DB) error {
	faults := os.Getenv("FAULTS") == "1"
	inbox, err := outbox.NewInbox(db, "effects")
	if err != nil {
		return err
	}
	pid := os.Getpid()
	pub := outbox.PublisherFunc(func(ctx context.Context, m outbox.Message) error {
		r := rand.Float64()
		if faults && r < 0.05 {
			return errors.New("injected: broker refused")
		}
		if faults && r < 0.055 {
			<-ctx.Done()
			return ctx.Err()
		}
		if _, err := db.Executor().Exec(ctx, `INSERT INTO deliveries (msg_id, pid) VALUES ($1, $2)`, m.UUID, pid); err != nil {
			return err
		}
		err := txn.Do(ctx, db, txn.Options{}, func(ctx context.Context, tx *sql.Tx) error {
			// The consumer lives in the relay's process here: frozen with
			// it, its transaction would hold the message's inbox key and
			// block the next relay's delivery of the same message. A real
			// consumer bounds its transactions too.
			if _, err := tx.ExecContext(ctx, `SET LOCAL idle_in_transaction_session_timeout = '1s'`); err != nil {
				return err
			}
			first, err := inbox.Receive(ctx, tx, m.UUID)
			if err != nil || !first {
				return err
			}
			_, err = tx.ExecContext(ctx, `INSERT INTO effects (msg_id) VALUES ($1)`, m.UUID)
			return err
		})
		if err != nil {
			return err
		}
		if faults && r < 0.075 {
			return errors.New("injected: answer lost")
		}
		return nil
	})
	r, err := pgstream.New(db, pub, pgstream.Options{LeaseTTL: 2 * time.Second, BatchSize: 50,
		BaseBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond, PublishTimeout: 300 * time.Millisecond, MaxAttempts: 1000})
	if err != nil {
		return err
	}
	fmt.Println("RELAY UP")
	return r.Run(ctx)
}

// TestStreamUnderFaults: streaming relay processes SIGKILLed and
// SIGSTOPped (the lease passes to another, which ends the frozen one's
// replication session), the database restarted, the publisher failing,
// hanging and losing answers, while producers commit. Then: nothing lost,
// nothing invented, every effect once (the inbox absorbs duplicates),
// and the first delivery of every message in commit order — overall and
// per key.
func TestStreamUnderFaults(t *testing.T) {
	env := dbtest.New(t, "postgres")
	if env.Server.Source != "local" {
		t.Skip("needs a local server to restart")
	}
	ctx := context.Background()
	db := env.DB
	for _, q := range []string{
		`CREATE TABLE commit_seq (n bigint NOT NULL)`, `INSERT INTO commit_seq VALUES (0)`,
		`CREATE TABLE deliveries (seq bigserial PRIMARY KEY, msg_id uuid NOT NULL, pid int NOT NULL)`,
		`CREATE TABLE effects (msg_id uuid NOT NULL)`,
		`CREATE TABLE sent (msg_id uuid PRIMARY KEY, n bigint NOT NULL, k text NOT NULL, i int NOT NULL)`,
	} {
		if _, err := db.Executor().Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	spawn := func() *dbtest.Proc {
		p := dbtest.Spawn(t, "stream-relay", "DSN="+env.DSN, "FAULTS=1")
		p.WaitLine(t, "RELAY UP", 30*time.Second)
		return p
	}
	relays := []*dbtest.Proc{spawn(), spawn(), spawn()}

	// Producers: each its own key, one message per transaction; the
	// counter row's lock orders the commits, recorded in the same
	// transaction (sent.n).
	ob := outbox.New(db)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var committed atomic.Int64
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := uuid.NewString()
				k := fmt.Sprint("k", w)
				err := txn.Do(ctx, db, txn.Options{}, func(ctx context.Context, tx *sql.Tx) error {
					if err := ob.Enqueue(ctx, tx, outbox.Msg{ID: id, Topic: "orders", Key: k, Payload: []byte(fmt.Sprint(i))}); err != nil {
						return err
					}
					_, err := tx.ExecContext(ctx, `WITH c AS (UPDATE commit_seq SET n = n + 1 RETURNING n) INSERT INTO sent SELECT $1, n, $2, $3 FROM c`, id, k, i)
					return err
				})
				if err != nil {
					i-- // the database is restarting: try the same message again
					time.Sleep(50 * time.Millisecond)
					continue
				}
				committed.Add(1)
				time.Sleep(time.Duration(5+rand.IntN(10)) * time.Millisecond)
			}
		}()
	}

	kills, stops := 0, 0
	end := time.Now().Add(12 * time.Second)
	restarted := false
	for time.Now().Before(end) {
		time.Sleep(time.Duration(400+rand.IntN(800)) * time.Millisecond)
		i := rand.IntN(len(relays))
		switch {
		case !restarted && time.Until(end) < 6*time.Second:
			restarted = true
			if err := env.Server.Restart(ctx); err != nil {
				t.Fatal(err)
			}
		case rand.IntN(3) == 0:
			stops++
			relays[i].Signal(syscall.SIGSTOP)
			time.Sleep(time.Duration(1000+rand.IntN(2500)) * time.Millisecond) // beyond the 2 s lease, often
			relays[i].Signal(syscall.SIGCONT)
		default:
			kills++
			relays[i].Kill()
			relays[i] = spawn()
		}
	}
	close(stop)
	wg.Wait()
	total := committed.Load()
	var delivered int64
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		db.Executor().QueryRow(ctx, `SELECT count(DISTINCT d.msg_id) FROM deliveries d JOIN sent s USING (msg_id)`).Scan(&delivered)
		if delivered >= total {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond) // late duplicates, if any, land now

	var bad []string
	check := func(what, q string) {
		rows, err := db.Executor().Query(ctx, q)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		defer rows.Close()
		for rows.Next() {
			var s string
			rows.Scan(&s)
			bad = append(bad, what+": "+s)
		}
	}
	check("lost", `SELECT s.msg_id::text FROM sent s WHERE NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.msg_id = s.msg_id)`)
	check("invented", `SELECT DISTINCT d.msg_id::text FROM deliveries d WHERE NOT EXISTS (SELECT 1 FROM sent s WHERE s.msg_id = d.msg_id)`)
	check("effect not once", `SELECT s.msg_id::text || ' x' || count(e.msg_id) FROM sent s LEFT JOIN effects e USING (msg_id) GROUP BY s.msg_id HAVING count(e.msg_id) <> 1`)
	// first deliveries, in delivery order, must follow commit order
	check("out of commit order", `SELECT format('commit %s first delivered after commit %s', n, prev) FROM (
  SELECT s.n, max(s.n) OVER (ORDER BY f.seq ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev
  FROM (SELECT msg_id, min(seq) AS seq FROM deliveries GROUP BY msg_id) f JOIN sent s USING (msg_id)) x WHERE n < prev`)
	check("out of key order", `SELECT format('%s: %s first delivered after %s', k, i, prev) FROM (
  SELECT s.k, s.i, max(s.i) OVER (PARTITION BY s.k ORDER BY f.seq ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev
  FROM (SELECT msg_id, min(seq) AS seq FROM deliveries GROUP BY msg_id) f JOIN sent s USING (msg_id)) x WHERE i < prev`)
	var deliveries, dups int64
	db.Executor().QueryRow(ctx, `SELECT count(*), count(*) - count(DISTINCT msg_id) FROM deliveries`).Scan(&deliveries, &dups)
	t.Logf("%d messages committed, %d deliveries (%d duplicates, absorbed by the inbox); %d SIGKILLs, %d SIGSTOPs, database restarted: %v",
		total, deliveries, dups, kills, stops, restarted)
	if total < 200 {
		t.Fatalf("only %d messages committed", total)
	}
	if len(bad) > 0 {
		t.Fatalf("%d violations, first: %v", len(bad), bad[:min(8, len(bad))])
	}
}

// TestStreamAcrossFailover: a replication slot does not survive a
// PostgreSQL 15 promotion. After the primary crashes and the synchronous
// standby is promoted, the relay finds no slot, makes a new one, publishes
// by polling what is still pending (committed before the slot), and
// streams again: every acknowledged message is delivered; the ones
// published but not yet marked before the crash come twice.
func TestStreamAcrossFailover(t *testing.T) {
	c := dbtest.NewPGClusterWith(t, true, "-c", "wal_level=logical", "-c", "max_replication_slots=8", "-c", "max_slot_wal_keep_size=1GB")
	ctx := context.Background()
	db, err := sqlcoord.Open(ctx, c.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := migrate.Migrate(ctx, db, migrate.Up); err != nil {
		t.Fatal(err)
	}
	pub := &collector{}
	startStream(t, db, pub, pgstream.Options{LeaseTTL: 2 * time.Second})
	ob := outbox.New(db)
	var mu sync.Mutex
	var acked []string
	produce := func(n int) {
		for range n {
			id := uuid.NewString()
			for ctx.Err() == nil {
				err := ob.EnqueueNow(ctx, outbox.Msg{ID: id, Topic: "t", Payload: []byte("x")})
				if err == nil || errors.Is(err, sqlcoord.ErrDuplicate) { // a retried commit that had landed
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			mu.Lock()
			acked = append(acked, id)
			mu.Unlock()
		}
	}
	produce(200)
	waitFor(t, 20*time.Second, "some deliveries before the failover", func() bool { return len(pub.got()) >= 100 })
	done := make(chan struct{})
	go func() { defer close(done); produce(300) }() // during and after the failover
	time.Sleep(30 * time.Millisecond)
	c.Failover(t)
	<-done
	delivered := func() map[string]int {
		n := map[string]int{}
		for _, m := range pub.got() {
			n[m.UUID]++
		}
		return n
	}
	waitFor(t, 60*time.Second, "every acknowledged message", func() bool {
		d := delivered()
		for _, id := range acked {
			if d[id] == 0 {
				return false
			}
		}
		return true
	})
	dups := 0
	for _, n := range delivered() {
		dups += n - 1
	}
	slots, _ := outbox.Slots(ctx, db)
	t.Logf("%d acknowledged messages all delivered across the promotion (%d twice); slots on the new primary: %v", len(acked), dups, slots)
	if len(slots) != 1 {
		t.Fatalf("want the relay's new slot on the promoted server, got %v", slots)
	}
}

// TestFrozenStreamerTakeover: at more than 1,000 messages/s the
// streaming relay that is publishing is frozen (SIGSTOP) and stays frozen.
// Its lease (2 s) passes to the other relay, which must publish on its own
// within the lease TTL and about one more: the frozen one's batch
// transaction, holding the rows it claimed, is ended by the server
// (idle_in_transaction_session_timeout = LeaseTTL) instead of waiting for
// the process to wake. Without that bound the group stalls until the
// frozen relay is thawed.
func TestFrozenStreamerTakeover(t *testing.T) {
	if testing.Short() {
		t.Skip("fault test")
	}
	env := dbtest.New(t, "postgres")
	ctx := context.Background()
	db := env.DB
	for _, q := range []string{
		`CREATE TABLE deliveries (seq bigserial PRIMARY KEY, msg_id uuid NOT NULL, pid int NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp())`,
		`CREATE TABLE effects (msg_id uuid NOT NULL)`,
	} {
		if _, err := db.Executor().Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	var relays []*dbtest.Proc
	for range 2 {
		p := dbtest.Spawn(t, "stream-relay", "DSN="+env.DSN)
		p.WaitLine(t, "RELAY UP", 30*time.Second)
		relays = append(relays, p)
	}
	ob := outbox.New(db)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var committed atomic.Int64
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				msgs := make([]outbox.Msg, 25)
				for i := range msgs {
					msgs[i] = outbox.Msg{Topic: "orders", Payload: []byte("{}")}
				}
				err := txn.Do(ctx, db, txn.Options{}, func(ctx context.Context, tx *sql.Tx) error { return ob.Enqueue(ctx, tx, msgs...) })
				if err == nil {
					committed.Add(int64(len(msgs)))
				}
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()
	time.Sleep(3 * time.Second)
	start := committed.Load()
	time.Sleep(2 * time.Second)
	rate := (committed.Load() - start) / 2
	if rate < 1000 {
		t.Fatalf("only %d messages/s committed: the test needs at least 1,000", rate)
	}
	var pid int
	if err := db.Executor().QueryRow(ctx, `SELECT pid FROM deliveries ORDER BY seq DESC LIMIT 1`).Scan(&pid); err != nil {
		t.Fatalf("nothing delivered yet: %v", err)
	}
	var frozen, other *dbtest.Proc
	for _, p := range relays {
		if p.Cmd.Process.Pid == pid {
			frozen = p
		} else {
			other = p
		}
	}
	if frozen == nil {
		t.Fatalf("the publishing relay (pid %d) is not one of the relays", pid)
	}
	frozen.Signal(syscall.SIGSTOP)
	defer frozen.Signal(syscall.SIGCONT)
	frozeAt := time.Now()
	// the other relay publishes on its own, the frozen one still frozen
	const bound = 8 * time.Second // lease TTL 2 s, the frozen batch's bound 2 s, the new session's start
	var took time.Duration
	for {
		var n int
		db.Executor().QueryRow(ctx, `SELECT count(*) FROM deliveries WHERE pid = $1 AND at > $2`, other.Cmd.Process.Pid, frozeAt.Add(time.Second)).Scan(&n)
		if n >= 100 {
			took = time.Since(frozeAt)
			break
		}
		if time.Since(frozeAt) > 20*time.Second {
			logActivity(t, db)
			t.Fatalf("the group stalled: the other relay published %d messages in 20 s after the streamer froze (%d msgs/s offered)", n, rate)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("%d msgs/s offered; the streamer froze; the other relay published 100 messages %v later", rate, took.Round(10*time.Millisecond))
	if took > bound {
		t.Errorf("takeover took %v: more than %v (lease TTL plus the frozen batch's bound)", took, bound)
	}
}

// logActivity logs what every session of the test database is doing (a
// stall's diagnosis: who waits for what, who is idle in a transaction).
func logActivity(t *testing.T, db *sqlcoord.DB) {
	t.Helper()
	rows, err := db.Executor().Query(context.Background(), `SELECT pid, backend_type, COALESCE(state, ''), COALESCE(wait_event_type || ':' || wait_event, ''),
  COALESCE(extract(epoch FROM clock_timestamp() - xact_start)::text, ''), pg_blocking_pids(pid)::text, left(COALESCE(query, ''), 160)
FROM pg_stat_activity WHERE datname = current_database() OR backend_type = 'walsender'`)
	if err != nil {
		t.Logf("pg_stat_activity: %v", err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		var pid int
		var typ, state, wait, xact, blockers, q string
		if rows.Scan(&pid, &typ, &state, &wait, &xact, &blockers, &q) == nil {
			t.Logf("pid %d %s %s wait=%s xact=%ss blocked-by=%s: %s", pid, typ, state, wait, xact, blockers, q)
		}
	}
}
