package pgstream_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/coord"
	"github.com/sqlcoord/sqlcoord/outbox"
	"github.com/sqlcoord/sqlcoord/outbox/pgstream"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
	"github.com/sqlcoord/sqlcoord/txn"
)

// collector records what a publisher was given, in order.
type collector struct {
	mu   sync.Mutex
	msgs []outbox.Message
	fail func(m outbox.Message) error
}

func (c *collector) Publish(ctx context.Context, m outbox.Message) error {
	if c.fail != nil {
		if err := c.fail(m); err != nil {
			return err
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.msgs = append(c.msgs, m)
	return nil
}

func (c *collector) got() []outbox.Message {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]outbox.Message(nil), c.msgs...)
}

// waitFor waits until cond holds (or fails t after limit).
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// startStream runs a streaming relay until the test ends.
func startStream(t *testing.T, db sqlcoord.Base, pub outbox.Publisher, opt pgstream.Options) *pgstream.Relay {
	t.Helper()
	r, err := pgstream.New(db, pub, opt)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("stream relay: %v", err)
		}
	})
	return r
}

// commitOrdered enqueues one message per transaction from several
// goroutines; each transaction then takes a counter row's lock, so the
// transactions commit in counter order — while their outbox ids (taken at
// the INSERT, before the lock) are in another order. It returns each
// message's place in commit order by UUID.
func commitOrdered(t *testing.T, env *dbtest.Env, workers, each int) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	db := env.DB
	if _, err := db.Executor().Exec(ctx, `CREATE TABLE commit_seq (n bigint NOT NULL); INSERT INTO commit_seq VALUES (0)`); err != nil {
		t.Fatal(err)
	}
	ob := outbox.New(db)
	var mu sync.Mutex
	place := map[string]int64{}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				id := uuid.NewString()
				var n int64
				err := txn.Do(ctx, db, txn.Options{}, func(ctx context.Context, tx *sql.Tx) error {
					if err := ob.Enqueue(ctx, tx, outbox.Msg{ID: id, Topic: "orders", Key: fmt.Sprint("k", w), Payload: []byte(fmt.Sprint(w, "/", i))}); err != nil {
						return err
					}
					time.Sleep(time.Duration(rand.IntN(1500)) * time.Microsecond)
					return tx.QueryRowContext(ctx, `UPDATE commit_seq SET n = n + 1 RETURNING n`).Scan(&n)
				})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				place[id] = n
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return place
}

// checkCommitOrder: every message delivered, none invented, in commit
// order; it returns the violations.
func checkCommitOrder(place map[string]int64, got []outbox.Message) []string {
	var bad []string
	seen := map[string]int{}
	last := int64(0)
	for _, m := range got {
		n, ok := place[m.UUID]
		if !ok {
			bad = append(bad, "invented "+m.UUID)
			continue
		}
		seen[m.UUID]++
		if seen[m.UUID] > 1 {
			bad = append(bad, fmt.Sprintf("%s delivered twice", m.UUID))
			continue
		}
		if n < last {
			bad = append(bad, fmt.Sprintf("commit %d (id %d, attempt %d) delivered after commit %d", n, m.ID, m.Attempt, last))
		}
		last = max(last, n)
	}
	for id := range place {
		if seen[id] == 0 {
			bad = append(bad, "lost "+id)
		}
	}
	return bad
}

func TestStreamCommitOrder(t *testing.T) {
	env := dbtest.New(t, "postgres")
	pub := &collector{}
	startStream(t, env.DB, pub, pgstream.Options{})
	// the relay streams before the producers start (its first polling
	// pass, publishing what was committed before its slot, is over), so
	// everything comes through the stream
	if err := outbox.New(env.DB).EnqueueNow(context.Background(), outbox.Msg{ID: uuid.NewString(), Topic: "probe", Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the probe", func() bool { return len(pub.got()) == 1 })
	pub.mu.Lock()
	pub.msgs = nil
	pub.mu.Unlock()
	place := commitOrdered(t, env, 8, 40)
	waitFor(t, 30*time.Second, "every message", func() bool { return len(pub.got()) >= len(place) })
	time.Sleep(100 * time.Millisecond) // anything more would be a duplicate
	if bad := checkCommitOrder(place, pub.got()); len(bad) > 0 {
		t.Fatalf("%d violations, first: %v", len(bad), bad[:min(5, len(bad))])
	}
	// the relay marks a batch published after its publisher returned: a
	// loaded machine can be slower than the check above
	var pending int
	deadline := time.Now().Add(10 * time.Second)
	for {
		env.DB.Executor().QueryRow(context.Background(), `SELECT count(*) FROM coord_outbox WHERE state <> 'published'`).Scan(&pending)
		if pending == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if pending != 0 {
		t.Fatalf("%d messages not marked published 10 s after they were published", pending)
	}
}

// The same producers with the polling relay: id order is not commit
// order, so the check above fails (the reason the stream exists).
func TestPollingIsNotCommitOrder(t *testing.T) {
	env := dbtest.New(t, "postgres")
	pub := &collector{}
	place := commitOrdered(t, env, 8, 40)
	r, err := outbox.NewRelay(env.DB, pub, outbox.RelayOptions{BatchSize: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	bad := checkCommitOrder(place, pub.got())
	if len(bad) == 0 {
		t.Skip("this run's commits happened to be in id order")
	}
	t.Logf("polling relay: %d order violations, e.g. %s", len(bad), bad[0])
}

func TestStreamCatchesUpAndWakes(t *testing.T) {
	env := dbtest.New(t, "postgres")
	ctx := context.Background()
	ob := outbox.New(env.DB)
	// committed before the relay's slot exists: the first polling pass
	if err := ob.EnqueueNow(ctx, outbox.Msg{Topic: "t", Payload: []byte("before")}); err != nil {
		t.Fatal(err)
	}
	pub := &collector{fail: func(m outbox.Message) error {
		if string(m.Payload) == "refused" {
			return outbox.Permanent(errors.New("no"))
		}
		return nil
	}}
	startStream(t, env.DB, pub, pgstream.Options{})
	has := func(p string) func() bool {
		return func() bool {
			for _, m := range pub.got() {
				if string(m.Payload) == p {
					return true
				}
			}
			return false
		}
	}
	waitFor(t, 20*time.Second, "the message committed before the slot", has("before"))
	t.Run("delayed", func(t *testing.T) {
		if err := ob.EnqueueNow(ctx, outbox.Msg{Topic: "t", Payload: []byte("delayed"), Delay: 700 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
		if has("delayed")() {
			t.Fatal("published before its delay")
		}
		waitFor(t, 10*time.Second, "the delayed message", has("delayed"))
	})
	t.Run("requeued", func(t *testing.T) {
		if err := ob.EnqueueNow(ctx, outbox.Msg{Topic: "t", Payload: []byte("refused")}); err != nil {
			t.Fatal(err)
		}
		var dead int
		waitFor(t, 10*time.Second, "dead-lettering", func() bool {
			env.DB.Executor().QueryRow(ctx, `SELECT count(*) FROM coord_outbox WHERE state = 'dead'`).Scan(&dead)
			return dead == 1
		})
		// dead-lettered at its first attempt, counted once (the claim's
		// mark given back first)
		var attempts int
		if err := env.DB.QueryRowContext(ctx, `SELECT attempts FROM coord_outbox WHERE state = 'dead'`).Scan(&attempts); err != nil || attempts != 1 {
			t.Fatalf("the dead letter's attempts: %d, %v; want 1", attempts, err)
		}
		pub.fail = nil
		if _, err := outbox.NewAdmin(env.DB).Requeue(ctx, 0); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, "the requeued message", has("refused"))
	})
	t.Run("retried in place, in order", func(t *testing.T) {
		var mu sync.Mutex
		fails := 2
		pub.fail = func(m outbox.Message) error {
			mu.Lock()
			defer mu.Unlock()
			if string(m.Payload) == "flaky" && fails > 0 {
				fails--
				return errors.New("broker down")
			}
			return nil
		}
		if err := ob.EnqueueNow(ctx, outbox.Msg{Topic: "t", Payload: []byte("flaky")}, outbox.Msg{Topic: "u", Payload: []byte("after")}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 20*time.Second, "the message after the flaky one", has("after"))
		got := pub.got()
		if string(got[len(got)-2].Payload) != "flaky" || got[len(got)-2].Attempt != 3 {
			t.Fatalf("want flaky (attempt 3) then after, got %q (attempt %d)", got[len(got)-2].Payload, got[len(got)-2].Attempt)
		}
		// The rows say what happened: the batches that failed at "flaky"
		// gave "after" back each time (not published, no attempt).
		for p, want := range map[string]int{"flaky": 3, "after": 1} {
			var state string
			var attempts int
			waitFor(t, 5*time.Second, "the mark of "+p, func() bool {
				err := env.DB.QueryRowContext(ctx, `SELECT state, attempts FROM coord_outbox WHERE payload = $1`, p).Scan(&state, &attempts)
				return err == nil && state == "published"
			})
			if attempts != want {
				t.Errorf("%s: attempts %d, want %d", p, attempts, want)
			}
		}
	})
}

// A server that keeps WAL for slots without bound is refused (unless
// allowed), and one without wal_level=logical cannot stream: both are
// errors Run returns at once, so `relay --mode auto` can fall back.
func TestStreamServerChecks(t *testing.T) {
	ctx := context.Background()
	private := func(t *testing.T, args ...string) *sqlcoord.DB {
		return dbtest.PrivatePostgres(t, "streamcheck", sqlcoord.Options{}, args...)
	}
	pub := &collector{}
	t.Run("unbounded slot", func(t *testing.T) {
		db := private(t, "-c", "max_slot_wal_keep_size=-1")
		t.Run("refused", func(t *testing.T) {
			r, err := pgstream.New(db, pub, pgstream.Options{})
			if err != nil {
				t.Fatal(err)
			}
			rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			if err := r.Run(rctx); !errors.Is(err, outbox.ErrUnboundedSlot) {
				t.Fatalf("Run: %v, want ErrUnboundedSlot", err)
			}
			if s, _ := outbox.Slots(ctx, db); len(s) != 0 {
				t.Fatalf("a slot was created: %v", s)
			}
		})
		t.Run("allowed", func(t *testing.T) {
			startStream(t, db, pub, pgstream.Options{AllowUnboundedSlot: true})
			if err := outbox.New(db).EnqueueNow(ctx, outbox.Msg{Topic: "t", Payload: []byte("allowed")}); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 20*time.Second, "the message", func() bool { return len(pub.got()) == 1 })
		})
	})
	t.Run("wal_level replica", func(t *testing.T) {
		db := private(t, "-c", "wal_level=replica")
		if err := outbox.CanStream(ctx, db); !errors.Is(err, outbox.ErrStreamUnsupported) || !strings.Contains(err.Error(), "wal_level is replica") {
			t.Fatalf("CanStream: %v", err)
		}
		r, err := pgstream.New(db, pub, pgstream.Options{})
		if err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		if err := r.Run(rctx); !errors.Is(err, outbox.ErrStreamUnsupported) {
			t.Fatalf("Run: %v, want ErrStreamUnsupported", err)
		}
		// a requeue still works without logical decoding (its wake-up is
		// best effort)
		if _, err := outbox.NewAdmin(db).Requeue(ctx, 0); err != nil {
			t.Fatal(err)
		}
	})
}

func TestStreamBadInput(t *testing.T) {
	env := dbtest.New(t, "postgres")
	pub := &collector{}
	for name, opt := range map[string]pgstream.Options{
		"group with a capital": {Group: "Orders"},
		"group with a space":   {Group: "orders "},
		"group not UTF-8":      {Group: "or\xffders"},
		"group too long":       {Group: strings.Repeat("g", 33)},
		"negative lease":       {LeaseTTL: -time.Second},
		"lease under a second": {LeaseTTL: 10 * time.Millisecond},
		"negative backoff":     {BaseBackoff: -1},
		"batch too large":      {BatchSize: 10001},
		"unknown DSN scheme":   {DSN: "mongodb://u:hunter2@h/db"},
		"DSN with bad port":    {DSN: "postgres://u:hunter2@h:99999/db"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := pgstream.New(env.DB, pub, opt)
			if !errors.Is(err, outbox.ErrInvalid) {
				t.Fatalf("%v, want ErrInvalid", err)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Fatalf("the password shows: %v", err)
			}
		})
	}
	t.Run("no publisher", func(t *testing.T) {
		if _, err := pgstream.New(env.DB, nil, pgstream.Options{}); !errors.Is(err, outbox.ErrInvalid) {
			t.Fatalf("%v, want ErrInvalid", err)
		}
	})
	t.Run("a user without REPLICATION", func(t *testing.T) {
		ctx := context.Background()
		role := "norepl_" + env.Name
		if _, err := env.DB.Executor().Exec(ctx, `CREATE ROLE `+role+` LOGIN PASSWORD 'hunter2'`); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { env.DB.Executor().Exec(context.Background(), `DROP ROLE IF EXISTS `+role) })
		dsn := fmt.Sprintf("postgres://%s:hunter2@%s:%d/%s?sslmode=disable", role, env.Server.Host, env.Server.Port, env.Name)
		r, err := pgstream.New(env.DB, pub, pgstream.Options{DSN: dsn, Group: "norepl"})
		if err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		err = r.Run(rctx)
		if !errors.Is(err, outbox.ErrStreamUnsupported) {
			t.Fatalf("Run: %v, want ErrStreamUnsupported", err)
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Fatalf("the password shows: %v", err)
		}
		outbox.DropStreamSlot(ctx, env.DB, "norepl")
	})
	t.Run("mysql", func(t *testing.T) {
		my := dbtest.New(t, "mysql")
		if _, err := pgstream.New(my.DB, pub, pgstream.Options{}); !errors.Is(err, outbox.ErrStreamUnsupported) {
			t.Fatalf("%v, want ErrStreamUnsupported", err)
		}
		if err := outbox.CanStream(context.Background(), my.DB); !errors.Is(err, outbox.ErrStreamUnsupported) {
			t.Fatalf("%v, want ErrStreamUnsupported", err)
		}
	})
}

// A commit can reach the stream before it is visible to other sessions
// (PostgreSQL writes the commit record, the walsender decodes it, and
// only then does the committing backend leave the proc array): the
// relay's claim must not take such a row for "already published".
// Producers in a tight loop make that window common.
func TestStreamSeesEveryCommitUnderLoad(t *testing.T) {
	env := dbtest.New(t, "postgres")
	ctx := context.Background()
	pub := &collector{}
	startStream(t, env.DB, pub, pgstream.Options{DeleteOnPublish: true})
	if err := outbox.New(env.DB).EnqueueNow(ctx, outbox.Msg{Topic: "probe", Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the probe", func() bool { return len(pub.got()) == 1 })
	ob := outbox.New(env.DB)
	var mu sync.Mutex
	sent := map[string]bool{}
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for range 24 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for pctx.Err() == nil {
				id := uuid.NewString()
				err := txn.Do(ctx, env.DB, txn.Options{}, func(ctx context.Context, tx *sql.Tx) error {
					// each commit flushes its own WAL, waking the walsender
					// at once (the shared server runs synchronous_commit off)
					if _, err := tx.ExecContext(ctx, `SET LOCAL synchronous_commit = on`); err != nil {
						return err
					}
					return ob.Enqueue(ctx, tx, outbox.Msg{ID: id, Topic: "t", Payload: []byte("x")})
				})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				sent[id] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	got := func() int {
		n := 0
		for _, m := range pub.got() {
			if sent[m.UUID] {
				n++
			}
		}
		return n
	}
	deadline := time.Now().Add(30 * time.Second)
	for got() < len(sent) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	var left int
	env.DB.Executor().QueryRow(ctx, `SELECT count(*) FROM coord_outbox`).Scan(&left)
	if n := got(); n != len(sent) {
		t.Fatalf("%d of %d messages delivered; %d rows left in the outbox", n, len(sent), left)
	}
	t.Logf("%d messages, all delivered", len(sent))
}

// A streaming relay stopped (its context cancelled, as on SIGTERM) in the
// middle of a batch finishes the publish under way, marks and
// acknowledges what it published: the next streamer publishes each
// remaining message once, and none again.
func TestStreamStopsCleanly(t *testing.T) {
	env := dbtest.New(t, "postgres")
	ctx := context.Background()
	var mu sync.Mutex
	count := map[string]int{}
	slow := outbox.PublisherFunc(func(ctx context.Context, m outbox.Message) error {
		time.Sleep(20 * time.Millisecond)
		mu.Lock()
		defer mu.Unlock()
		count[m.UUID]++
		return nil
	})
	delivered := func() int { mu.Lock(); defer mu.Unlock(); return len(count) }
	r, err := pgstream.New(env.DB, slow, pgstream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx) }()
	ob := outbox.New(env.DB)
	if err := ob.EnqueueNow(ctx, outbox.Msg{Topic: "probe", Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the probe", func() bool { return delivered() == 1 })
	// a second probe, streamed (the first may have left by the polling
	// pass that starts a new slot): the batch below then runs in the
	// transaction begun after its batch
	if err := ob.EnqueueNow(ctx, outbox.Msg{Topic: "probe", Payload: []byte("y")}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the second probe", func() bool { return delivered() == 2 })
	msgs := make([]outbox.Msg, 100)
	for i := range msgs {
		msgs[i] = outbox.Msg{Topic: "t", Payload: []byte(fmt.Sprint(i))}
	}
	if err := ob.EnqueueNow(ctx, msgs...); err != nil { // one commit, one batch
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the batch under way", func() bool { return delivered() >= 10 })
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	first := delivered()
	startStream(t, env.DB, slow, pgstream.Options{})
	waitFor(t, 30*time.Second, "every message", func() bool { return delivered() == 102 })
	time.Sleep(200 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	twice := 0
	for _, n := range count {
		if n > 1 {
			twice++
		}
	}
	if twice > 0 {
		t.Fatalf("%d messages published twice (%d before the stop)", twice, first)
	}
	t.Logf("%d published before the stop, the rest by the next relay, none twice", first-2)
}

// PgBouncer does not pass replication connections: a streaming relay
// pointed through it says so (ErrStreamUnsupported, so `--mode auto`
// polls) instead of retrying for ever.
func TestStreamThroughPgBouncer(t *testing.T) {
	env := dbtest.New(t, "postgres")
	bouncer := env.PgBouncer(t, 4)
	r, err := pgstream.New(env.DB, &collector{}, pgstream.Options{DSN: bouncer})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.Run(ctx); !errors.Is(err, outbox.ErrStreamUnsupported) {
		t.Fatalf("Run: %v, want ErrStreamUnsupported", err)
	}
}

// TestStreamFlakyPublisherKeepsFlowing: a publisher that
// refuses 5 % of first attempts costs the ordered stream milliseconds per
// failure, not a second: with the default backoff (10 ms, doubling) 2,000
// messages drain within seconds, in order. With the 1 s first backoff of
// 1.0 every failure stalled the group for 0.5–1 s (about 75 s here). The
// bound is on the time the refusals add to a drain of the same messages
// without them, measured just before: 400 ms a refusal, below the 500 ms
// the old backoff slept at least. An idle machine drains in about 7 s
// (65 ms a refusal, most of it the retried batch's claim and give-back);
// one with two CPU burners beside a whole `make test` took 262 ms a
// refusal.
func TestStreamFlakyPublisherKeepsFlowing(t *testing.T) {
	env := dbtest.New(t, "postgres")
	ctx := context.Background()
	ob := outbox.New(env.DB)
	var mu sync.Mutex
	failed := map[string]bool{}
	flaky := false
	pub := &collector{fail: func(m outbox.Message) error {
		mu.Lock()
		defer mu.Unlock()
		if flaky && m.Key != "" && m.Key[len(m.Key)-1] == '7' && !failed[m.UUID] && rand.IntN(2) == 0 {
			failed[m.UUID] = true // ~5 %: keys ending in 7 are 10 %, half of those
			return errors.New("injected: broker busy")
		}
		return nil
	}}
	startStream(t, env.DB, pub, pgstream.Options{Group: "flaky"})
	if err := ob.EnqueueNow(ctx, outbox.Msg{Topic: "t", Payload: []byte("warm")}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the stream to start", func() bool { return len(pub.got()) == 1 })
	const n = 2000
	drain := func(what string, published int) time.Duration {
		for b := range n / 100 {
			msgs := make([]outbox.Msg, 100)
			for i := range msgs {
				msgs[i] = outbox.Msg{Topic: "t", Key: fmt.Sprint(b*100 + i), Payload: []byte(fmt.Sprint(b*100 + i))}
			}
			if err := ob.EnqueueNow(ctx, msgs...); err != nil {
				t.Fatal(err)
			}
		}
		start := time.Now()
		waitFor(t, 120*time.Second, what, func() bool { return len(pub.got()) == published+n })
		return time.Since(start)
	}
	base := drain("2,000 messages through a publisher that refuses nothing", 1)
	mu.Lock()
	flaky = true
	mu.Unlock()
	took := drain("2,000 messages through a flaky publisher", 1+n)
	mu.Lock()
	refusals := len(failed)
	mu.Unlock()
	got := pub.got()[1+n:]
	for i, m := range got {
		if string(m.Payload) != fmt.Sprint(i) {
			t.Fatalf("message %d published as the %d-th: out of commit order", i, i)
		}
	}
	t.Logf("%d messages, %d refused once, drained in %v (without refusals %v)", n, refusals, took.Round(10*time.Millisecond), base.Round(10*time.Millisecond))
	if refusals < 20 {
		t.Fatalf("only %d refusals: the test did not exercise the backoff", refusals)
	}
	if took-base > time.Duration(refusals)*400*time.Millisecond {
		t.Errorf("%d refusals stalled the stream for %v more than a drain without them (more than 400 ms a refusal)", refusals, took-base)
	}
}

// TestStreamTopicGroups: two streaming groups with disjoint
// topic filters on one outbox each publish only their topics, in commit
// order, every message once between them; a bad filter is refused.
func TestStreamTopicGroups(t *testing.T) {
	env := dbtest.New(t, "postgres")
	ctx := context.Background()
	ob := outbox.New(env.DB)
	orders, rest := &collector{}, &collector{}
	startStream(t, env.DB, orders, pgstream.Options{Group: "orders", Topics: []string{"orders"}})
	startStream(t, env.DB, rest, pgstream.Options{Group: "rest", Topics: []string{"mail", "audit"}})
	// both streaming before the test (the first polling pass of a new slot
	// publishes in id order)
	if err := ob.EnqueueNow(ctx, outbox.Msg{Topic: "orders", Payload: []byte("-1")}, outbox.Msg{Topic: "mail", Payload: []byte("-1")}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "both groups streaming", func() bool { return len(orders.got()) == 1 && len(rest.got()) == 1 })
	for i := range 300 {
		topic := []string{"orders", "mail", "audit"}[i%3]
		if err := ob.EnqueueNow(ctx, outbox.Msg{Topic: topic, Payload: []byte(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 30*time.Second, "300 messages through two groups", func() bool { return len(orders.got())+len(rest.got()) >= 302 })
	time.Sleep(200 * time.Millisecond)
	for name, c := range map[string]*collector{"orders": orders, "rest": rest} {
		prev := -2
		for _, m := range c.got() {
			if (name == "orders") != (m.Topic == "orders") {
				t.Errorf("group %s published a %s message", name, m.Topic)
			}
			var i int
			fmt.Sscan(string(m.Payload), &i)
			if i <= prev {
				t.Errorf("group %s: %d published after %d (commit order, or twice)", name, i, prev)
			}
			prev = i
		}
	}
	if n := len(orders.got()) + len(rest.got()); n != 302 {
		t.Fatalf("%d publishes for 302 messages", n)
	}
	if _, err := pgstream.New(env.DB, orders, pgstream.Options{Topics: []string{""}}); !errors.Is(err, outbox.ErrInvalid) {
		t.Fatalf("an empty topic: %v, want ErrInvalid", err)
	}
}

// TestStreamStuckHeadIsVisible: while the group's head message
// keeps failing, it shows where operators look — Stats.Failing, the row's
// attempts and last error — and stops showing once it is published.
func TestStreamStuckHeadIsVisible(t *testing.T) {
	env := dbtest.New(t, "postgres")
	ctx := context.Background()
	ob := outbox.New(env.DB)
	var broken atomic.Bool
	broken.Store(true)
	pub := &collector{fail: func(m outbox.Message) error {
		if string(m.Payload) == "head" && broken.Load() {
			return errors.New("injected: broker down")
		}
		return nil
	}}
	startStream(t, env.DB, pub, pgstream.Options{Group: "stuck", BaseBackoff: 20 * time.Millisecond, MaxBackoff: 50 * time.Millisecond, MaxAttempts: 1000})
	if err := ob.EnqueueNow(ctx, outbox.Msg{Topic: "t", Payload: []byte("warm")}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the stream to start", func() bool { return len(pub.got()) == 1 })
	if err := ob.EnqueueNow(ctx, outbox.Msg{Topic: "t", Payload: []byte("head")}, outbox.Msg{Topic: "t", Payload: []byte("behind")}); err != nil {
		t.Fatal(err)
	}
	adm := outbox.NewAdmin(env.DB)
	waitFor(t, 10*time.Second, "Stats.Failing = 1", func() bool {
		st, err := adm.Stats(ctx)
		return err == nil && st.Failing == 1
	})
	var attempts int
	var lastErr string
	if err := env.DB.QueryRowContext(ctx, `SELECT attempts, last_error FROM coord_outbox WHERE payload = 'head'`).Scan(&attempts, &lastErr); err != nil || attempts < 1 || !strings.Contains(lastErr, "broker down") {
		t.Fatalf("the head's row: attempts %d, last_error %q, %v", attempts, lastErr, err)
	}
	if n := len(pub.got()); n != 1 {
		t.Fatalf("%d published while the head fails: a message overtook it", n)
	}
	broken.Store(false)
	waitFor(t, 10*time.Second, "the head and the one behind it", func() bool { return len(pub.got()) == 3 })
	waitFor(t, 10*time.Second, "Stats.Failing = 0", func() bool {
		st, err := adm.Stats(ctx)
		return err == nil && st.Failing == 0
	})
}

// The statement a streamer claims with marks nothing for a streamer whose
// lease is not live (it answers -1 instead, which ends the session), and
// marks the pending rows of a live one in its transaction only: rolled
// back, they are pending again.
func TestStreamClaimIsFenced(t *testing.T) {
	env := dbtest.New(t, "postgres")
	ctx := context.Background()
	if err := outbox.New(env.DB).EnqueueNow(ctx, outbox.Msg{Topic: "t", Payload: []byte("fenced")}); err != nil {
		t.Fatal(err)
	}
	var id int64
	if err := env.DB.QueryRowContext(ctx, `SELECT id FROM coord_outbox WHERE payload = 'fenced'`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	lease, err := coord.New(env.DB).Acquire(ctx, "fence-test", "streamer-1", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	q := env.DB.Dialect().Q().OutboxStreamClaimMark
	// claim runs the claim in a transaction and returns what it answered
	// and the row's state in that transaction, then rolls back.
	claim := func(token int64) (got []int64, inTx string) {
		t.Helper()
		tx, err := env.DB.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		rows, err := tx.QueryContext(ctx, q, []int64{id}, lease.Name, lease.Owner, token)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var x int64
			if err := rows.Scan(&x); err != nil {
				t.Fatal(err)
			}
			got = append(got, x)
		}
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
		if err := tx.QueryRowContext(ctx, `SELECT state FROM coord_outbox WHERE id = $1`, id).Scan(&inTx); err != nil {
			t.Fatal(err)
		}
		return got, inTx
	}
	state := func() string {
		var s string
		if err := env.DB.QueryRowContext(ctx, `SELECT state FROM coord_outbox WHERE id = $1`, id).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	t.Run("stale token marks nothing", func(t *testing.T) {
		got, inTx := claim(lease.Token - 1)
		if len(got) != 1 || got[0] != -1 {
			t.Fatalf("claim with a stale token returned %v, want [-1]", got)
		}
		if inTx != "pending" {
			t.Fatalf("state %s after a refused claim, in its transaction", inTx)
		}
	})
	t.Run("live lease marks, rollback gives back", func(t *testing.T) {
		got, inTx := claim(lease.Token)
		if len(got) != 1 || got[0] != id {
			t.Fatalf("claim with the live lease returned %v, want [%d]", got, id)
		}
		if inTx != "published" {
			t.Fatalf("state %s after the claim, in its transaction; want published", inTx)
		}
		if s := state(); s != "pending" {
			t.Fatalf("state %s after the claiming transaction rolled back", s)
		}
	})
}

// The transaction a streamer begins ahead for its next batch may be ended
// while it waits (an administrator, a server timeout): the next commit is
// still published, in a new transaction, without ending the stream.
func TestStreamSurvivesItsWaitingTransactionEnding(t *testing.T) {
	env := dbtest.New(t, "postgres")
	ctx := context.Background()
	var logs dbtest.Buffer
	pub := &collector{}
	startStream(t, env.DB, pub, pgstream.Options{Group: "ahead", Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	ob := outbox.New(env.DB)
	send := func(p string) {
		t.Helper()
		if err := ob.EnqueueNow(ctx, outbox.Msg{Topic: "t", Payload: []byte(p)}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, p, func() bool {
			for _, m := range pub.got() {
				if string(m.Payload) == p {
					return true
				}
			}
			return false
		})
	}
	waitFor(t, 20*time.Second, "streaming", func() bool { return strings.Contains(logs.String(), "msg=streaming") })
	send("first") // streamed: a batch, after which the next one's transaction is begun
	var ended int
	waitFor(t, 5*time.Second, "the transaction begun ahead, ended", func() bool {
		// only the transaction begun ahead (its last statement is its
		// BEGIN), not a batch's between two of its statements
		env.DB.QueryRowContext(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
WHERE datname = current_database() AND state = 'idle in transaction' AND pid <> pg_backend_pid() AND query ILIKE 'begin%'`).Scan(&ended)
		return ended > 0
	})
	send("second")
	if n := strings.Count(logs.String(), `msg=streaming`); n != 1 {
		t.Fatalf("the stream started %d times, want 1 (no new session for a failed transaction begun ahead):\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "beginning anew") {
		t.Fatalf("no retry logged:\n%s", logs.String())
	}
}

// outbox.Slots lists the slots of the database it is asked about, not
// every sqlcoord slot on the server: a doctor or console run against one
// database must not report (or fail on) another database's relays.
func TestSlotsAreThisDatabases(t *testing.T) {
	ctx := context.Background()
	a, b := dbtest.New(t, "postgres"), dbtest.New(t, "postgres")
	name := outbox.SlotName("slotscope", a.Name)
	if _, err := a.DB.Executor().Exec(ctx, `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.DB.Executor().Exec(context.Background(), `SELECT pg_drop_replication_slot($1)`, name) })
	t.Run("listed on its database", func(t *testing.T) {
		s, err := outbox.Slots(ctx, a.DB)
		if err != nil {
			t.Fatal(err)
		}
		if len(s) != 1 || s[0].Name != name || s[0].Database != a.Name || s[0].Active {
			t.Fatalf("Slots = %+v, want only %s, inactive", s, name)
		}
	})
	t.Run("not listed on another", func(t *testing.T) {
		s, err := outbox.Slots(ctx, b.DB)
		if err != nil {
			t.Fatal(err)
		}
		for _, sl := range s {
			if sl.Database != b.Name {
				t.Errorf("Slots of %s lists %s of %s", b.Name, sl.Name, sl.Database)
			}
		}
	})
}

// A slot the server invalidated (it fell behind max_slot_wal_keep_size
// while no relay read it) cannot be read again: the relay drops it, makes
// a new one and publishes by polling what is pending — nothing is lost,
// and the group does not stay down until an operator drops the slot.
func TestStreamLostSlotIsReplaced(t *testing.T) {
	ctx := context.Background()
	db := dbtest.PrivatePostgres(t, "lostslot", sqlcoord.Options{}, "-c", "max_slot_wal_keep_size=1MB", "-c", "max_wal_size=32MB", "-c", "min_wal_size=32MB")
	pub := &collector{}
	ob := outbox.New(db)
	{ // a first relay makes the slot, then stops for good
		r, err := pgstream.New(db, pub, pgstream.Options{})
		if err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- r.Run(rctx) }()
		if err := ob.EnqueueNow(ctx, outbox.Msg{Topic: "t", Payload: []byte("first")}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 30*time.Second, "the first message", func() bool { return len(pub.got()) == 1 })
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	// messages committed while no relay runs, and enough WAL after them
	// that the checkpoint invalidates the slot
	for i := 0; i < 5; i++ {
		if err := ob.EnqueueNow(ctx, outbox.Msg{Topic: "t", Payload: []byte(fmt.Sprintf("while down %d", i))}); err != nil {
			t.Fatal(err)
		}
	}
	x := db.Executor()
	if _, err := x.Exec(ctx, `CREATE TABLE filler (b text)`); err != nil {
		t.Fatal(err)
	}
	status := ""
	for i := 0; i < 20 && status != "lost"; i++ {
		if _, err := x.Exec(ctx, `INSERT INTO filler SELECT repeat('x', 1000) FROM generate_series(1, 20000)`); err != nil {
			t.Fatal(err)
		}
		x.Exec(ctx, `SELECT pg_switch_wal()`)
		if _, err := x.Exec(ctx, `CHECKPOINT`); err != nil {
			t.Fatal(err)
		}
		s, err := outbox.Slots(ctx, db)
		if err != nil || len(s) != 1 {
			t.Fatalf("slots: %v %v", s, err)
		}
		status = s[0].WALStatus
	}
	if status != "lost" {
		t.Fatalf("the slot was not invalidated (wal_status %q)", status)
	}
	var logs dbtest.Buffer
	startStream(t, db, pub, pgstream.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	waitFor(t, 30*time.Second, "the messages committed while the slot was lost", func() bool { return len(pub.got()) >= 6 })
	// and it streams again
	if err := ob.EnqueueNow(ctx, outbox.Msg{Topic: "t", Payload: []byte("after")}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "a message after the new slot", func() bool { return len(pub.got()) >= 7 })
	if !strings.Contains(logs.String(), "replication slot lost") {
		t.Errorf("no warning about the lost slot in the log:\n%s", logs.String())
	}
	if s, _ := outbox.Slots(ctx, db); len(s) != 1 || s[0].WALStatus == "lost" {
		t.Errorf("slots after: %+v", s)
	}
}
