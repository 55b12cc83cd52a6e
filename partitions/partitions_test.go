package partitions_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/outbox"
	"github.com/sqlcoord/sqlcoord/outbox/pgstream"
	"github.com/sqlcoord/sqlcoord/partitions"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

func TestMain(m *testing.M) {
	dbtest.MainWithHelpers(m, map[string]dbtest.HelperFunc{"producer": runProducer, "claimer": runClaimer})
}

// runProducer enqueues $N messages, each in a transaction of its own,
// with payloads "$NAME-i", and prints DONE once all are committed. Any
// error ends it with exit status 1: a producer must never fail because
// the outbox is being partitioned.
func runProducer(ctx context.Context, db *sqlcoord.DB) error {
	n, _ := strconv.Atoi(os.Getenv("N"))
	name := os.Getenv("NAME")
	ob := outbox.New(db)
	for i := 0; i < n; i++ {
		if err := enqueue(ctx, db, ob, outbox.Msg{Topic: "t", Payload: []byte(fmt.Sprintf("%s-%d", name, i))}); err != nil {
			return err
		}
	}
	fmt.Println("DONE")
	return nil
}

func enqueue(ctx context.Context, db *sqlcoord.DB, ob *outbox.Outbox[*sql.Tx], m outbox.Msg) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := ob.Enqueue(ctx, tx, m); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

func supported(t *testing.T, env *dbtest.Env) {
	t.Helper()
	if env.DB.Dialect().Partitioner() == nil {
		t.Skipf("%s: no partitioner", env.DB.Dialect().Name())
	}
}

// exec runs a statement written with ? placeholders on env's database.
func exec(t *testing.T, env *dbtest.Env, q string, args ...any) {
	t.Helper()
	if _, err := env.DB.ExecContext(context.Background(), env.DB.Rebind(q), args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// ageAll makes every published message look published two days ago
// (READ COMMITTED: passing rows other transactions hold).
func ageAll(t *testing.T, env *dbtest.Env) {
	t.Helper()
	old := "now() - interval '2 days'"
	if env.Family != "postgres" {
		old = "UTC_TIMESTAMP(6) - INTERVAL 2 DAY"
	}
	ctx := context.Background()
	tx, err := env.DB.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "UPDATE coord_outbox SET published_at = "+old+" WHERE state = 'published'"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// drain publishes everything due with a relay's Once, returning the
// payloads in publishing order.
func drain(t *testing.T, db sqlcoord.Base, into *[]string, mu *sync.Mutex) {
	t.Helper()
	r, err := outbox.NewRelay(db, outbox.PublisherFunc(func(ctx context.Context, m outbox.Message) error {
		mu.Lock()
		*into = append(*into, string(m.Payload))
		mu.Unlock()
		return nil
	}), outbox.RelayOptions{BatchSize: 200, Listen: outbox.ListenOff})
	if err != nil {
		t.Fatal(err)
	}
	for {
		n, err := r.Once(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
	}
}

func TestOptions(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		supported(t, env)
		ctx := context.Background()
		t.Run("a plain outbox is not partitioned", func(t *testing.T) {
			if _, err := partitions.Status(ctx, env.DB); !errors.Is(err, partitions.ErrNotPartitioned) {
				t.Fatalf("Status: %v, want ErrNotPartitioned", err)
			}
			if _, err := partitions.Roll(ctx, env.DB, partitions.RollOptions{OlderThan: time.Hour}); !errors.Is(err, partitions.ErrNotPartitioned) {
				t.Fatalf("Roll: %v, want ErrNotPartitioned", err)
			}
		})
		t.Run("options out of range are refused before anything runs", func(t *testing.T) {
			for _, o := range []partitions.Options{{Size: 10}, {Size: -5}, {Ahead: -1}, {Ahead: 1000}} {
				if err := partitions.Enable(ctx, env.DB, o); !errors.Is(err, partitions.ErrInvalid) {
					t.Errorf("Enable(%+v): %v, want ErrInvalid", o, err)
				}
			}
			for _, age := range []time.Duration{0, -time.Hour} {
				if _, err := partitions.Roll(ctx, env.DB, partitions.RollOptions{OlderThan: age}); !errors.Is(err, partitions.ErrInvalid) {
					t.Errorf("Roll(%v): %v, want ErrInvalid", age, err)
				}
			}
			if _, err := partitions.Status(ctx, env.DB); !errors.Is(err, partitions.ErrNotPartitioned) {
				t.Fatalf("after refused calls: %v, want the outbox still plain", err)
			}
		})
		t.Run("enabled twice", func(t *testing.T) {
			if err := partitions.Enable(ctx, env.DB, partitions.Options{Size: 1000}); err != nil {
				t.Fatal(err)
			}
			if err := partitions.Enable(ctx, env.DB, partitions.Options{Size: 1000}); !errors.Is(err, partitions.ErrPartitioned) {
				t.Fatalf("second Enable: %v, want ErrPartitioned", err)
			}
		})
	})
}

// TestEnableKeepsEveryMessage: what the outbox held before Enable is
// published after it, pending messages in id order, once; a dead letter
// can still be requeued, a pending message cancelled.
func TestEnableKeepsEveryMessage(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		supported(t, env)
		ctx := context.Background()
		ob := outbox.New(env.DB)
		var mu sync.Mutex
		var got []string
		for i := 0; i < 50; i++ {
			if err := enqueue(ctx, env.DB, ob, outbox.Msg{Topic: "t", Payload: []byte(fmt.Sprintf("old-%02d", i))}); err != nil {
				t.Fatal(err)
			}
		}
		drain(t, env.DB, &got, &mu) // published: history
		for i := 0; i < 30; i++ {
			if err := enqueue(ctx, env.DB, ob, outbox.Msg{Topic: "t", Payload: []byte(fmt.Sprintf("pending-%02d", i))}); err != nil {
				t.Fatal(err)
			}
		}
		const cancelled = "01890a5d-ac96-774b-bcce-b302099a8057"
		if err := enqueue(ctx, env.DB, ob, outbox.Msg{Topic: "t", Payload: []byte("cancelled"), ID: cancelled}); err != nil {
			t.Fatal(err)
		}
		if err := partitions.Enable(ctx, env.DB, partitions.Options{Size: 1000, Ahead: 2}); err != nil {
			t.Fatal(err)
		}
		tx, err := env.DB.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := ob.Cancel(ctx, tx, cancelled); err != nil {
			t.Fatalf("Cancel after Enable: %v", err)
		}
		tx.Commit()
		got = nil
		drain(t, env.DB, &got, &mu)
		var want []string
		for i := 0; i < 30; i++ {
			want = append(want, fmt.Sprintf("pending-%02d", i))
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("published after Enable:\n%v\nwant\n%v", got, want)
		}
		l, err := partitions.Status(ctx, env.DB)
		if err != nil {
			t.Fatal(err)
		}
		made := 0
		for _, p := range l.Parts {
			if !p.CatchAll && p.From > l.Issued {
				made++
			}
		}
		if made < 2 {
			t.Fatalf("%d partitions above the last id issued (%d), want 2: %+v", made, l.Issued, l.Parts)
		}
		// new messages go on in order after the old ones
		if err := enqueue(ctx, env.DB, ob, outbox.Msg{Topic: "t", Payload: []byte("new")}); err != nil {
			t.Fatal(err)
		}
		got = nil
		drain(t, env.DB, &got, &mu)
		if strings.Join(got, ",") != "new" {
			t.Fatalf("published: %v, want [new]", got)
		}
	})
}

// TestEnableUnderLoadLosesNothing: producers in this process and in two
// others enqueue while Enable converts the table and Roll, from three
// goroutines at once, makes and drops partitions under them; a relay
// publishes all along. Every committed message is published, no producer
// sees an error, no Roll fails because another got there first.
func TestEnableUnderLoadLosesNothing(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		supported(t, env)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		const perProc, perGoroutine, goroutines = 1500, 400, 6
		procs := []*dbtest.Proc{
			dbtest.Spawn(t, "producer", "DSN="+env.DSN, "N="+strconv.Itoa(perProc), "NAME=proc0"),
			dbtest.Spawn(t, "producer", "DSN="+env.DSN, "N="+strconv.Itoa(perProc), "NAME=proc1"),
		}
		var published sync.Map
		var n atomic.Int64
		r, err := outbox.NewRelay(env.DB, outbox.PublisherFunc(func(ctx context.Context, m outbox.Message) error {
			if _, dup := published.LoadOrStore(string(m.Payload), true); !dup {
				n.Add(1)
			}
			return nil
		}), outbox.RelayOptions{BatchSize: 100, PollMin: 5 * time.Millisecond, PollMax: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		relayDone := make(chan struct{})
		go func() { defer close(relayDone); r.Run(ctx) }()
		ob := outbox.New(env.DB)
		var wg sync.WaitGroup
		errs := make(chan error, goroutines+3)
		for g := 0; g < goroutines; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < perGoroutine; i++ {
					if err := enqueue(ctx, env.DB, ob, outbox.Msg{Topic: "t", Payload: []byte(fmt.Sprintf("g%d-%d", g, i))}); err != nil {
						errs <- fmt.Errorf("producer g%d, message %d: %w", g, i, err)
						return
					}
				}
			}()
		}
		time.Sleep(300 * time.Millisecond) // producers under way
		if err := partitions.Enable(ctx, env.DB, partitions.Options{Size: 1000, Ahead: 1}); err != nil {
			t.Fatalf("Enable under load: %v", err)
		}
		var rolls sync.WaitGroup
		for range 3 { // Roll over and over from three places, as cron would, while producers run
			rolls.Add(1)
			go func() {
				defer rolls.Done()
				for ctx.Err() == nil {
					if _, err := partitions.Roll(ctx, env.DB, partitions.RollOptions{OlderThan: time.Millisecond, Ahead: 1}); err != nil && ctx.Err() == nil && !errors.Is(err, partitions.ErrBusy) {
						errs <- fmt.Errorf("Roll: %w", err)
						return
					}
					time.Sleep(50 * time.Millisecond)
				}
			}()
		}
		wg.Wait()
		for _, p := range procs {
			p.WaitLine(t, "DONE", 2*time.Minute)
		}
		want := int64(2*perProc + goroutines*perGoroutine)
		deadline := time.Now().Add(time.Minute)
		for n.Load() < want && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		cancel()
		<-relayDone
		rolls.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if got := n.Load(); got != want {
			var missing []string
			for _, name := range []string{"proc0", "proc1"} {
				for i := 0; i < perProc && len(missing) < 10; i++ {
					if _, ok := published.Load(fmt.Sprintf("%s-%d", name, i)); !ok {
						missing = append(missing, fmt.Sprintf("%s-%d", name, i))
					}
				}
			}
			t.Fatalf("%d of %d committed messages published; missing e.g. %v", got, want, missing)
		}
		if _, err := partitions.Status(context.Background(), env.DB); err != nil {
			t.Fatal(err)
		}
	})
}

// TestRollDropsOnlyWhatIsFinished: a partition is dropped only once
// every id of it was issued and every message in it published before the
// cutoff; one pending, dead-lettered or recent message keeps it.
func TestRollDropsOnlyWhatIsFinished(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		supported(t, env)
		ctx := context.Background()
		if err := partitions.Enable(ctx, env.DB, partitions.Options{Size: 1000, Ahead: 4}); err != nil {
			t.Fatal(err)
		}
		ob := outbox.New(env.DB)
		// 4,500 messages: four full partitions and half of a fifth
		tx, _ := env.DB.BeginTx(ctx, nil)
		for i := 0; i < 4500; i++ {
			if err := ob.Enqueue(ctx, tx, outbox.Msg{Topic: "t", Payload: []byte(strconv.Itoa(i))}); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		l, err := partitions.Status(ctx, env.DB)
		if err != nil {
			t.Fatal(err)
		}
		var full []partitions.Partition // the four full ones, oldest first
		for _, p := range l.Parts {
			if !p.CatchAll && p.Size() > 0 && p.To-1 <= l.Issued {
				full = append(full, p)
			}
		}
		if len(full) != 4 {
			t.Fatalf("%d full partitions, want 4: %+v (issued %d)", len(full), l.Parts, l.Issued)
		}
		var mu sync.Mutex
		var got []string
		drain(t, env.DB, &got, &mu)
		ageAll(t, env)
		// full[0]: finished. full[1]: one message pending again.
		// full[2]: one dead letter. full[3]: one published just now.
		now := "now()"
		if env.Family != "postgres" {
			now = "UTC_TIMESTAMP(6)"
		}
		exec(t, env, "UPDATE coord_outbox SET state = 'pending', published_at = NULL WHERE id = ?", full[1].From+10)
		exec(t, env, "UPDATE coord_outbox SET state = 'dead', published_at = NULL WHERE id = ?", full[2].From+20)
		exec(t, env, "UPDATE coord_outbox SET published_at = "+now+" WHERE id = ?", full[3].From+30)
		res, err := partitions.Roll(ctx, env.DB, partitions.RollOptions{OlderThan: 24 * time.Hour, Ahead: 4})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(res.Dropped, full[0].Name) || slices.ContainsFunc(full[1:], func(p partitions.Partition) bool { return slices.Contains(res.Dropped, p.Name) }) {
			t.Errorf("dropped %v, want %s and none of the other full ones", res.Dropped, full[0].Name)
		}
		held := map[string]string{}
		for _, h := range res.Held {
			held[h.Partition] = h.Reason
		}
		for i, want := range []string{"", "pending", "dead", "recently"} {
			if i == 0 {
				continue
			}
			if !strings.Contains(held[full[i].Name], want) {
				t.Errorf("%s kept for %q, want a reason naming %q", full[i].Name, held[full[i].Name], want)
			}
		}
		var rows int
		if err := env.DB.QueryRowContext(ctx, "SELECT COUNT(*) FROM coord_outbox").Scan(&rows); err != nil {
			t.Fatal(err)
		}
		if rows != 3500 {
			t.Fatalf("%d messages left, want 3,500 (one partition of 1,000 dropped)", rows)
		}
		if len(res.Created) == 0 {
			t.Errorf("Roll made no partition ahead (ids issued up to %d)", l.Issued)
		}
	})
}

// TestDropWaitsForAnUncommittedMessage: a message inserted into an old
// partition by a transaction still open when Roll checks it (its id was
// issued before the partition filled up) keeps the partition: Roll waits
// for that transaction, or gives up busy, and never drops the message.
func TestDropWaitsForAnUncommittedMessage(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		supported(t, env)
		ctx := context.Background()
		if err := partitions.Enable(ctx, env.DB, partitions.Options{Size: 1000, Ahead: 2}); err != nil {
			t.Fatal(err)
		}
		ob := outbox.New(env.DB)
		// the open transaction's message takes the first id of a
		// partition; 1,100 more fill it up and start the next
		open, err := env.DB.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer open.Rollback()
		if err := ob.Enqueue(ctx, open, outbox.Msg{Topic: "t", Payload: []byte("late")}); err != nil {
			t.Fatal(err)
		}
		tx, _ := env.DB.BeginTx(ctx, nil)
		for i := 0; i < 1100; i++ {
			if err := ob.Enqueue(ctx, tx, outbox.Msg{Topic: "t", Payload: []byte("x")}); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var got []string
		drain(t, env.DB, &got, &mu)
		ageAll(t, env)
		done := make(chan error, 1)
		var res partitions.RollResult
		go func() {
			var err error
			res, err = partitions.Roll(ctx, env.DB, partitions.RollOptions{OlderThan: time.Hour})
			done <- err
		}()
		time.Sleep(500 * time.Millisecond)
		if err := open.Commit(); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil && !errors.Is(err, partitions.ErrBusy) {
			t.Fatal(err)
		}
		got = nil
		drain(t, env.DB, &got, &mu)
		if strings.Join(got, ",") != "late" {
			t.Fatalf("published after Roll: %v, want [late] (dropped: %v)", got, res.Dropped)
		}
	})
}

// TestChosenIDUniqueAcrossPartitions: a message id the caller chose is
// refused a second time after its partition was dropped, and accepted
// again once Roll forgot it (older than the retention age).
func TestChosenIDUniqueAcrossPartitions(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		supported(t, env)
		ctx := context.Background()
		if err := partitions.Enable(ctx, env.DB, partitions.Options{Size: 1000, Ahead: 1}); err != nil {
			t.Fatal(err)
		}
		ob := outbox.New(env.DB)
		const id = "01890a5d-ac96-774b-bcce-b302099a8058"
		if err := enqueue(ctx, env.DB, ob, outbox.Msg{Topic: "t", ID: id}); err != nil {
			t.Fatal(err)
		}
		tx, _ := env.DB.BeginTx(ctx, nil)
		for i := 0; i < 2100; i++ {
			if err := ob.Enqueue(ctx, tx, outbox.Msg{Topic: "t"}); err != nil {
				t.Fatal(err)
			}
		}
		tx.Commit()
		var mu sync.Mutex
		var got []string
		drain(t, env.DB, &got, &mu)
		ageAll(t, env)
		// its partition goes, the id is younger than a day: kept
		res, err := partitions.Roll(ctx, env.DB, partitions.RollOptions{OlderThan: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Dropped) == 0 {
			t.Fatalf("nothing dropped: %+v", res)
		}
		if err := enqueue(ctx, env.DB, ob, outbox.Msg{Topic: "t", ID: id}); !errors.Is(err, sqlcoord.ErrDuplicate) {
			t.Fatalf("the id again after its partition was dropped: %v, want ErrDuplicate", err)
		}
		old := "now() - interval '2 days'"
		if env.Family != "postgres" {
			old = "UTC_TIMESTAMP(6) - INTERVAL 2 DAY"
		}
		exec(t, env, "UPDATE coord_outbox_ids SET created_at = "+old)
		if res, err = partitions.Roll(ctx, env.DB, partitions.RollOptions{OlderThan: time.Hour}); err != nil || res.IDsForgotten != 1 {
			t.Fatalf("Roll: %+v, %v; want the id forgotten", res, err)
		}
		if err := enqueue(ctx, env.DB, ob, outbox.Msg{Topic: "t", ID: id}); err != nil {
			t.Fatalf("the id again once forgotten: %v", err)
		}
	})
}

// TestIdsOutrunningThePartitions: with nothing rolling, ids run past the
// partitions made ahead; producers go on (the catch-all takes them), and
// the next Roll makes partitions above them again.
func TestIdsOutrunningThePartitions(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		supported(t, env)
		ctx := context.Background()
		if err := partitions.Enable(ctx, env.DB, partitions.Options{Size: 1000, Ahead: 1}); err != nil {
			t.Fatal(err)
		}
		ob := outbox.New(env.DB)
		tx, _ := env.DB.BeginTx(ctx, nil)
		for i := 0; i < 4000; i++ {
			if err := ob.Enqueue(ctx, tx, outbox.Msg{Topic: "t"}); err != nil {
				t.Fatalf("message %d past the partitions: %v", i, err)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		res, err := partitions.Roll(ctx, env.DB, partitions.RollOptions{OlderThan: time.Hour, Ahead: 2})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Created) < 2 {
			t.Fatalf("Roll made %v, want at least 2 partitions", res.Created)
		}
		l, err := partitions.Status(ctx, env.DB)
		if err != nil {
			t.Fatal(err)
		}
		above := 0
		for _, p := range l.Parts {
			if !p.CatchAll && p.From > l.Issued {
				above++
			}
		}
		if above != 2 {
			t.Fatalf("%d partitions above id %d, want 2: %+v", above, l.Issued, l.Parts)
		}
		var mu sync.Mutex
		var got []string
		drain(t, env.DB, &got, &mu)
		if len(got) != 4000 {
			t.Fatalf("published %d, want 4,000", len(got))
		}
	})
}

// TestStreamingRelayAcrossEnable: a PostgreSQL streaming relay reading
// the WAL while Enable switches the table goes on delivering: messages
// committed before, during and after the switch each arrive, none lost
// (the publication follows the table, publishing through its root).
func TestStreamingRelayAcrossEnable(t *testing.T) {
	env := dbtest.New(t, "postgres")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := outbox.CanStream(ctx, env.DB); err != nil {
		t.Skip(err)
	}
	var seen sync.Map
	var n atomic.Int64
	r, err := pgstream.New(env.DB, outbox.PublisherFunc(func(ctx context.Context, m outbox.Message) error {
		if _, dup := seen.LoadOrStore(string(m.Payload), true); !dup {
			n.Add(1)
		}
		return nil
	}), pgstream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	ob := outbox.New(env.DB)
	var wg sync.WaitGroup
	const goroutines, each = 4, 300
	failed := make(chan error, goroutines)
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				if err := enqueue(ctx, env.DB, ob, outbox.Msg{Topic: "t", Payload: []byte(fmt.Sprintf("g%d-%d", g, i))}); err != nil {
					failed <- err
					return
				}
			}
		}()
	}
	time.Sleep(200 * time.Millisecond)
	if err := partitions.Enable(ctx, env.DB, partitions.Options{Size: 1000, Ahead: 2}); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(failed)
	for err := range failed {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for n.Load() < goroutines*each && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("stream relay: %v", err)
	}
	if got := n.Load(); got != goroutines*each {
		t.Fatalf("%d of %d messages delivered by the streaming relay", got, goroutines*each)
	}
}

// TestEnableStoppedHalfway: an Enable whose context ends midway leaves a
// working outbox — plain, or partitioned if it got that far — with
// nothing of the attempt left that could refuse a later id, and Enable
// can be run again.
func TestEnableStoppedHalfway(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		supported(t, env)
		ob := outbox.New(env.DB)
		tx, _ := env.DB.BeginTx(context.Background(), nil)
		for i := 0; i < 3000; i++ {
			if err := ob.Enqueue(context.Background(), tx, outbox.Msg{Topic: "t"}); err != nil {
				t.Fatal(err)
			}
		}
		tx.Commit()
		for _, after := range []time.Duration{time.Millisecond, 5 * time.Millisecond, 20 * time.Millisecond, 60 * time.Millisecond} {
			ctx, cancel := context.WithTimeout(context.Background(), after)
			err := partitions.Enable(ctx, env.DB, partitions.Options{Size: 1000})
			cancel()
			if err == nil {
				break
			}
			var leftovers int
			q := `SELECT (SELECT count(*) FROM pg_constraint WHERE conname = 'coord_outbox_history') + (SELECT count(*) FROM pg_class WHERE relname = 'coord_outbox_new')`
			if env.Family != "postgres" {
				q = `SELECT (SELECT COUNT(*) FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = DATABASE() AND TRIGGER_NAME LIKE 'coord_outbox_mirror%') +
  (SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'coord_outbox_new')`
			}
			if err := env.DB.QueryRowContext(context.Background(), q).Scan(&leftovers); err != nil {
				t.Fatal(err)
			}
			if _, serr := partitions.Status(context.Background(), env.DB); errors.Is(serr, partitions.ErrNotPartitioned) && leftovers > 0 {
				t.Fatalf("Enable stopped after %v (%v) left %d pieces of itself on the plain table", after, err, leftovers)
			}
			if err := enqueue(context.Background(), env.DB, ob, outbox.Msg{Topic: "t"}); err != nil {
				t.Fatalf("enqueue after an Enable stopped after %v: %v", after, err)
			}
		}
		if err := partitions.Enable(context.Background(), env.DB, partitions.Options{Size: 1000}); err != nil && !errors.Is(err, partitions.ErrPartitioned) {
			t.Fatalf("Enable again: %v", err)
		}
		var mu sync.Mutex
		var got []string
		drain(t, env.DB, &got, &mu)
		if len(got) < 3000 {
			t.Fatalf("published %d, want every message (at least 3,000)", len(got))
		}
	})
}

// TestEnableKeepsTheOwner: a PostgreSQL outbox owned by the application's
// role and partitioned by another (an administrator) stays the
// application's: its owner, and the role can enqueue and roll.
func TestEnableKeepsTheOwner(t *testing.T) {
	env := dbtest.New(t, "postgres")
	ctx := context.Background()
	role := "sqlcoord_app_" + strconv.Itoa(os.Getpid())
	exec(t, env, `DROP ROLE IF EXISTS `+role)
	exec(t, env, `CREATE ROLE `+role+` LOGIN`)
	t.Cleanup(func() {
		env.DB.ExecContext(context.Background(), `DROP OWNED BY `+role)
		env.DB.ExecContext(context.Background(), `DROP ROLE IF EXISTS `+role)
	})
	exec(t, env, `GRANT ALL ON SCHEMA public TO `+role)
	exec(t, env, `ALTER TABLE coord_outbox OWNER TO `+role)
	exec(t, env, `GRANT SELECT ON coord_outbox TO PUBLIC`)
	if err := partitions.Enable(ctx, env.DB, partitions.Options{Size: 1000}); err != nil {
		t.Fatal(err)
	}
	var owner string
	var public bool
	if err := env.DB.QueryRowContext(ctx, `SELECT pg_get_userbyid(relowner), has_table_privilege('public', 'coord_outbox', 'SELECT') FROM pg_class WHERE oid = 'coord_outbox'::regclass`).Scan(&owner, &public); err != nil {
		t.Fatal(err)
	}
	if owner != role || !public {
		t.Fatalf("after Enable: owner %s, PUBLIC may read: %v; want %s, true", owner, public, role)
	}
	// the role itself enqueues and rolls (where it can log in without a
	// password: the throwaway server's trust authentication)
	if !strings.Contains(env.DSN, "postgres@") {
		return
	}
	exec(t, env, `GRANT ALL ON ALL TABLES IN SCHEMA public TO `+role)
	exec(t, env, `GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO `+role)
	dsn := strings.Replace(env.DSN, "postgres@", role+"@", 1)
	db, err := sqlcoord.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := enqueue(ctx, db, outbox.New(db), outbox.Msg{Topic: "t"}); err != nil {
		t.Fatalf("the owner's enqueue: %v", err)
	}
	if _, err := partitions.Roll(ctx, db, partitions.RollOptions{OlderThan: time.Hour}); err != nil {
		t.Fatalf("the owner's Roll: %v", err)
	}
}
