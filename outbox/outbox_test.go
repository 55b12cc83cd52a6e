package outbox_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/outbox"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
	"github.com/sqlcoord/sqlcoord/txn"
)

// placeOrder writes an order and its message in one transaction and
// commits or rolls back.
func placeOrder(ctx context.Context, db *sqlcoord.DB, ob *outbox.Outbox[*sql.Tx], id int, commit bool) error {
	ph := db.Dialect().Placeholder
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `INSERT INTO orders (id) VALUES (`+ph(1)+`)`, id); err != nil {
		return err
	}
	m, _ := outbox.JSON("orders.created", "", map[string]int{"order": id})
	if err := ob.Enqueue(ctx, tx, m); err != nil {
		return err
	}
	if !commit {
		return tx.Rollback()
	}
	return tx.Commit()
}

func TestEnqueueAtomicity(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		db := env.DB
		dbtest.Exec(t, db, `CREATE TABLE orders (id INT PRIMARY KEY)`)
		ob := outbox.New(db)
		if err := placeOrder(ctx, db, ob, 1, false); err != nil {
			t.Fatal(err)
		}
		if n := dbtest.Count(t, db, `SELECT count(*) FROM coord_outbox`); n != 0 {
			t.Fatalf("rolled-back transaction left %d messages", n)
		}
		if err := placeOrder(ctx, db, ob, 2, true); err != nil {
			t.Fatal(err)
		}
		if n := dbtest.Count(t, db, `SELECT count(*) FROM coord_outbox`); n != 1 {
			t.Fatalf("committed transaction left %d messages", n)
		}
		if err := ob.EnqueueNow(ctx, outbox.Msg{Topic: ""}); !errors.Is(err, outbox.ErrInvalid) {
			t.Fatalf("empty topic: %v", err)
		}
		// a header that would not be stored byte for byte is refused, and
		// nothing of the call is enqueued
		for _, h := range []map[string]string{{"hdr": "bad\xff"}, {"bad\xfe": "v"}, {"hdr": "nul\x00"}, {"": "v"}} {
			err := ob.EnqueueNow(ctx, outbox.Msg{Topic: "headers", Payload: []byte("x")}, outbox.Msg{Topic: "headers", Headers: h})
			if !errors.Is(err, outbox.ErrInvalid) {
				t.Fatalf("headers %q: %v, want ErrInvalid", h, err)
			}
		}
		if n := dbtest.Count(t, db, db.Rebind(`SELECT count(*) FROM coord_outbox WHERE topic = ?`), "headers"); n != 0 {
			t.Fatalf("%d messages of a refused call enqueued", n)
		}
		// delayed delivery: not claimed before it is due
		var got atomic.Int64
		r, _ := outbox.NewRelay(db, outbox.PublisherFunc(func(ctx context.Context, m outbox.Message) error { got.Add(1); return nil }), outbox.RelayOptions{})
		ob.EnqueueNow(ctx, outbox.Msg{Topic: "later", Payload: []byte("x"), Delay: time.Hour})
		if n, err := r.Once(ctx); err != nil || n != 1 || got.Load() != 1 {
			t.Fatalf("once: %d %v (published %d)", n, err, got.Load())
		}
		st, _ := ob.Stats(ctx)
		if st.Pending != 1 || st.Published != 1 {
			t.Fatalf("stats %+v", st)
		}
	})
}

// Relay processes killed with SIGKILL at random points while 3 relays run
// and producers keep writing: every committed message is published at
// least once, the inbox consumer applies each exactly once, none is stuck.
func TestRelayCrashSafety(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		db := env.DB
		ph := db.Dialect().Placeholder
		dbtest.Exec(t, db, `CREATE TABLE orders (id INT PRIMARY KEY)`)
		dbtest.Exec(t, db, `CREATE TABLE points (order_id INT NOT NULL)`) // raw: doubles would show
		inbox, _ := outbox.NewInbox(db, "points")
		var deliveries atomic.Int64
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			deliveries.Add(1)
			var body struct{ Order int }
			if err := decodeJSON(r, &body); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			err := txn.Do(r.Context(), db, txn.Options{}, func(ctx context.Context, tx *sql.Tx) error {
				first, err := inbox.Receive(ctx, tx, r.Header.Get("Idempotency-Key"))
				if err != nil || !first {
					return err
				}
				_, err = tx.ExecContext(ctx, `INSERT INTO points (order_id) VALUES (`+ph(1)+`)`, body.Order)
				return err
			})
			if err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
			w.WriteHeader(http.StatusOK)
		}))
		defer srv.Close()
		spawn := func() *dbtest.Proc {
			p := dbtest.Spawn(t, "relay", "DSN="+env.DSN, "URL="+srv.URL)
			p.WaitLine(t, "RELAY UP", 20*time.Second)
			return p
		}
		relays := []*dbtest.Proc{spawn(), spawn(), spawn()}
		ob := outbox.New(db)
		var committed, rolledBack atomic.Int64
		var nextID atomic.Int64
		stopProducers := make(chan struct{})
		var wg sync.WaitGroup
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stopProducers:
						return
					default:
					}
					id := int(nextID.Add(1))
					commit := rand.IntN(10) != 0
					if err := placeOrder(ctx, db, ob, id, commit); err != nil {
						t.Error(err)
						return
					}
					if commit {
						committed.Add(1)
					} else {
						rolledBack.Add(1)
					}
					time.Sleep(time.Millisecond)
				}
			}()
		}
		kills := 0
		for end := time.Now().Add(4 * time.Second); time.Now().Before(end); {
			time.Sleep(time.Duration(200+rand.IntN(400)) * time.Millisecond)
			i := rand.IntN(len(relays))
			relays[i].Kill()
			kills++
			relays[i] = spawn()
		}
		close(stopProducers)
		wg.Wait()
		deadline := time.Now().Add(60 * time.Second)
		for time.Now().Before(deadline) {
			st, err := ob.Stats(ctx)
			if err == nil && st.Pending == 0 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		st, _ := ob.Stats(ctx)
		c := int(committed.Load())
		pts := dbtest.Count(t, db, `SELECT count(*) FROM points`)
		distinct := dbtest.Count(t, db, `SELECT count(DISTINCT order_id) FROM points`)
		orphans := dbtest.Count(t, db, `SELECT count(*) FROM points WHERE order_id NOT IN (SELECT id FROM orders)`)
		t.Logf("%d orders committed, %d rolled back; %d relay kills; %d HTTP deliveries; %d point grants; outbox %+v",
			c, rolledBack.Load(), kills, deliveries.Load(), pts, st)
		if st.Pending != 0 || st.Dead != 0 || int(st.Published) != c {
			t.Fatalf("outbox not settled: %+v, want %d published", st, c)
		}
		if pts != c || distinct != c || orphans != 0 {
			t.Fatalf("points %d (distinct %d, orphans %d), want %d", pts, distinct, orphans, c)
		}
		if int(deliveries.Load()) < c {
			t.Fatalf("%d deliveries for %d messages", deliveries.Load(), c)
		}
	})
}

// Per-key ordering with 3 concurrent relays. The relay is at-least-once:
// a batch whose marking or commit fails after publishing is published
// again, so an immediate repeat of the message just published is allowed,
// but only as many as the relays reported failed batches for; skipping
// ahead or going back is never allowed.
func TestOrderedRelays(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		ob := outbox.New(env.DB)
		const keys, per, batch = 5, 60, 10
		var mu sync.Mutex
		last := map[string]int{}
		var bad []string
		var distinct, repeats atomic.Int64
		pub := outbox.PublisherFunc(func(ctx context.Context, m outbox.Message) error {
			if rand.IntN(8) == 0 {
				return errors.New("flaky broker") // retried later: ordering must survive
			}
			seq, _ := strconv.Atoi(string(m.Payload))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case seq == last[m.Key]:
				repeats.Add(1)
			case seq != last[m.Key]+1:
				bad = append(bad, fmt.Sprintf("%s: %d after %d", m.Key, seq, last[m.Key]))
			default:
				distinct.Add(1)
			}
			last[m.Key] = seq
			return nil
		})
		failed := &countWriter{t: t, match: "relay batch failed"}
		rctx, cancel := context.WithCancel(ctx)
		var rw sync.WaitGroup
		for i := 0; i < 3; i++ {
			r, err := outbox.NewRelay(env.Open(t), pub, outbox.RelayOptions{Ordered: true, BatchSize: batch, PollMin: 5 * time.Millisecond,
				PollMax: 20 * time.Millisecond, BaseBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, MaxAttempts: 1000,
				Logger: slog.New(slog.NewTextHandler(failed, nil))})
			if err != nil {
				t.Fatal(err)
			}
			rw.Add(1)
			go func() { defer rw.Done(); r.Run(rctx) }()
		}
		var pw sync.WaitGroup
		for k := 0; k < keys; k++ {
			pw.Add(1)
			go func() {
				defer pw.Done()
				for s := 1; s <= per; s++ {
					err := txn.Do(ctx, env.DB, txn.Options{}, func(ctx context.Context, tx *sql.Tx) error {
						return ob.Enqueue(ctx, tx, outbox.Msg{Topic: "t", Key: fmt.Sprintf("k%d", k), Payload: []byte(strconv.Itoa(s))})
					})
					if err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		pw.Wait()
		deadline := time.Now().Add(60 * time.Second)
		for distinct.Load() < keys*per && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		cancel()
		rw.Wait()
		mu.Lock()
		defer mu.Unlock()
		if distinct.Load() != keys*per || len(bad) > 0 {
			t.Fatalf("published %d of %d; out of order: %v", distinct.Load(), keys*per, bad)
		}
		if n := failed.n.Load(); repeats.Load() > n*batch {
			t.Fatalf("%d messages published twice, but the relays reported only %d failed batches", repeats.Load(), n)
		}
		t.Logf("%d repeats after %d failed batches", repeats.Load(), failed.n.Load())
	})
}

// countWriter logs each line to t and counts those containing match.
type countWriter struct {
	t     *testing.T
	match string
	n     atomic.Int64
}

func (w *countWriter) Write(p []byte) (int, error) {
	if strings.Contains(string(p), w.match) {
		w.n.Add(1)
	}
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func TestDeadLetterAndRequeue(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		ob := outbox.New(env.DB)
		var fail atomic.Bool
		fail.Store(true)
		pub := outbox.PublisherFunc(func(ctx context.Context, m outbox.Message) error {
			if m.Topic == "bad-request" {
				return outbox.Permanent(errors.New("400 Bad Request"))
			}
			if fail.Load() {
				return errors.New("503 unavailable")
			}
			return nil
		})
		r, _ := outbox.NewRelay(env.DB, pub, outbox.RelayOptions{MaxAttempts: 3, BaseBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond})
		ob.EnqueueNow(ctx, outbox.Msg{Topic: "flaky", Payload: []byte("a")}, outbox.Msg{Topic: "bad-request", Payload: []byte("b")})
		for i := 0; i < 10; i++ {
			r.Once(ctx)
			time.Sleep(5 * time.Millisecond)
		}
		dead, err := ob.Dead(ctx, 10)
		if err != nil || len(dead) != 2 {
			t.Fatalf("dead %+v %v", dead, err)
		}
		for _, d := range dead {
			want := 3
			if d.Topic == "bad-request" {
				want = 1 // permanent: no retries
			}
			if d.Attempts != want || d.LastError == "" {
				t.Fatalf("%s: %d attempts (want %d), error %q", d.Topic, d.Attempts, want, d.LastError)
			}
		}
		fail.Store(false)
		if n, err := ob.Requeue(ctx, dead[0].ID); err != nil || n != 1 {
			t.Fatalf("requeue: %d %v", n, err)
		}
		r.Once(ctx)
		st, _ := ob.Stats(ctx)
		if st.Published != 1 || st.Dead != 1 {
			t.Fatalf("after requeue %+v", st)
		}
		if n, _ := ob.Cleanup(ctx, 0, 10); n != 1 {
			t.Fatalf("cleanup removed %d", n)
		}
	})
}

// The database restarts while a relay is relaying: it reconnects and
// continues; nothing is lost.
func TestRelaySurvivesDatabaseRestart(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		if env.Server.Source != "local" {
			t.Skip("needs a local server to restart")
		}
		ctx := context.Background()
		ob := outbox.New(env.DB)
		seen := sync.Map{}
		var n atomic.Int64
		pub := outbox.PublisherFunc(func(ctx context.Context, m outbox.Message) error {
			if _, dup := seen.LoadOrStore(m.ID, true); !dup {
				n.Add(1)
			}
			return nil
		})
		r, _ := outbox.NewRelay(env.Open(t), pub, outbox.RelayOptions{BatchSize: 10, PollMin: 5 * time.Millisecond, PollMax: 50 * time.Millisecond})
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { r.Run(rctx); close(done) }()
		const total = 400
		enq := func(from, to int) {
			for i := from; i < to; i++ {
				for {
					if err := ob.EnqueueNow(ctx, outbox.Msg{Topic: "t", Payload: []byte(strconv.Itoa(i))}); err == nil {
						break
					}
					time.Sleep(50 * time.Millisecond) // database down: the producer retries
				}
			}
		}
		enq(0, total/2)
		if err := env.Server.Restart(ctx); err != nil {
			t.Fatal(err)
		}
		enq(total/2, total)
		deadline := time.Now().Add(30 * time.Second)
		for n.Load() < total && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		cancel()
		<-done
		if n.Load() != total {
			t.Fatalf("published %d of %d after the restart", n.Load(), total)
		}
	})
}
