package partitions_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/dialects"
	"github.com/sqlcoord/sqlcoord/partitions"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
	"github.com/sqlcoord/sqlcoord/txn"
)

func keysSupported(t *testing.T, env *dbtest.Env) {
	t.Helper()
	if env.DB.Dialect().KeyPartitioner() == nil {
		t.Skipf("%s: no key partitioner", env.DB.Dialect().Name())
	}
}

// claim is one Keys.Record: its key, whether it found the key new (and
// committed) or replayed it, when the attempt started and when it ended
// (wall clock, comparable across the processes of one machine).
type claim struct {
	key        string
	isNew      bool
	start, end int64 // UnixNano
}

// record records key in a transaction of its own: true when it was new
// (and is committed), false when it replayed (rolled back). A transaction
// the server chose as a deadlock victim (InnoDB: duplicates of one key
// waiting on a claim that rolled back) is tried again, as a client would.
func record(ctx context.Context, db *sqlcoord.DB, k *txn.Keys[*sql.Tx], key string) (bool, error) {
	for {
		isNew, err := recordOnce(ctx, db, k, key)
		if !errors.Is(err, sqlcoord.ErrDeadlock) {
			return isNew, err
		}
	}
}

func recordOnce(ctx context.Context, db *sqlcoord.DB, k *txn.Keys[*sql.Tx], key string) (bool, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	c, err := k.Record(ctx, tx, "s", key, []byte("fp"), []byte("r-"+key))
	if err != nil {
		tx.Rollback()
		return false, err
	}
	if c.Replay {
		tx.Rollback()
		if string(c.Response) != "r-"+key {
			return false, fmt.Errorf("key %s replayed %q", key, c.Response)
		}
		return false, nil
	}
	return true, tx.Commit()
}

// hammer records keys picked at random from k0…k(n-1), a random pause of
// up to pause after each, until ctx ends, sending every attempt to out.
// The pauses put the claims at any point of a period (claims back to back
// would find each key new right at every period's start, a period apart
// whatever the protection).
func hammer(ctx context.Context, db *sqlcoord.DB, n int, pause time.Duration, out func(claim)) error {
	k := txn.NewKeys(db, txn.KeysOptions{})
	for i := 0; ctx.Err() == nil; i++ {
		if pause > 0 {
			time.Sleep(rand.N(pause))
		}
		key := "k" + strconv.Itoa(rand.IntN(n))
		start := time.Now().UnixNano()
		isNew, err := record(ctx, db, k, key)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		out(claim{key, isNew, start, time.Now().UnixNano()})
	}
	return nil
}

// runClaimer is hammer in a process of its own for $SECONDS: a line
// "NEW key start end" per new claim and "REPLAY key start end" per
// replayed one, then DONE. With $ROLL it also runs RollKeys every 100 ms.
func runClaimer(ctx context.Context, db *sqlcoord.DB) error {
	secs, _ := strconv.Atoi(os.Getenv("SECONDS"))
	n, _ := strconv.Atoi(os.Getenv("KEYS"))
	ctx, cancel := context.WithTimeout(ctx, time.Duration(secs)*time.Second)
	defer cancel()
	rolled := make(chan error, 1)
	if os.Getenv("ROLL") != "" {
		go func() { _, err := roll(ctx, db); rolled <- err }()
	} else {
		rolled <- nil
	}
	var mu sync.Mutex
	pause, _ := time.ParseDuration(os.Getenv("PAUSE"))
	err := hammer(ctx, db, n, pause, func(c claim) {
		mu.Lock()
		what := "REPLAY"
		if c.isNew {
			what = "NEW"
		}
		fmt.Printf("%s %s %d %d\n", what, c.key, c.start, c.end)
		mu.Unlock()
	})
	if err != nil {
		return err
	}
	if err := <-rolled; err != nil {
		return err
	}
	fmt.Println("DONE")
	return nil
}

// roll runs RollKeys every 100 ms until ctx ends, as cron would (faster),
// and returns how many partitions it dropped; any error but ErrBusy ends
// it.
func roll(ctx context.Context, db *sqlcoord.DB) (int, error) {
	dropped := 0
	for ctx.Err() == nil {
		res, err := partitions.RollKeys(ctx, db, partitions.KeysOptions{Ahead: 1})
		if err != nil && ctx.Err() == nil && !errors.Is(err, partitions.ErrBusy) {
			return dropped, fmt.Errorf("RollKeys: %w", err)
		}
		dropped += len(res.Dropped)
		time.Sleep(100 * time.Millisecond)
	}
	return dropped, nil
}

// TestKeysRefusedForAPeriod: on a partitioned coord_idempotency, a key is
// refused for at least one period after a claim of it committed — also
// across period boundaries and while RollKeys makes and drops partitions —
// and forgotten two periods after it. Goroutines and processes claim
// twelve keys at random moments for several periods while each process
// and three goroutines run RollKeys: any two claims of a key that both
// found it new must lie at least a period apart, a claim that replayed
// must have a new claim of its key less than two periods before it, and
// no roll fails because another made or dropped a partition first.
func TestKeysRefusedForAPeriod(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		keysSupported(t, env)
		ctx := context.Background()
		const period, keys, secs = 2 * time.Second, 12, 9
		if err := partitions.EnableKeys(ctx, env.DB, partitions.KeysOptions{Period: period, Ahead: 1}); err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var claims []claim
		add := func(c claim) { mu.Lock(); claims = append(claims, c); mu.Unlock() }
		procs := []*dbtest.Proc{
			dbtest.Spawn(t, "claimer", "DSN="+env.DSN, "SECONDS="+strconv.Itoa(secs), "KEYS="+strconv.Itoa(keys), "PAUSE="+(period/2).String(), "ROLL=1"),
			dbtest.Spawn(t, "claimer", "DSN="+env.DSN, "SECONDS="+strconv.Itoa(secs), "KEYS="+strconv.Itoa(keys), "PAUSE="+(period/2).String(), "ROLL=1"),
		}
		runCtx, cancel := context.WithTimeout(ctx, secs*time.Second)
		defer cancel()
		var wg sync.WaitGroup
		errc := make(chan error, 8)
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func() { defer wg.Done(); errc <- hammer(runCtx, env.DB, keys, period/2, add) }()
		}
		var dropped atomic.Int64
		for g := 0; g < 3; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				n, err := roll(runCtx, env.DB)
				dropped.Add(int64(n))
				errc <- err
			}()
		}
		for _, p := range procs {
			for {
				l := p.WaitLine(t, "", 2*time.Minute)
				if l == "DONE" {
					break
				}
				var c claim
				var what string
				if _, err := fmt.Sscanf(l, "%s %s %d %d", &what, &c.key, &c.start, &c.end); err != nil || (what != "NEW" && what != "REPLAY") {
					t.Fatalf("claimer printed %q", l)
				}
				c.isNew = what == "NEW"
				add(c)
			}
		}
		wg.Wait()
		close(errc)
		for err := range errc {
			if err != nil {
				t.Fatal(err)
			}
		}
		byKey := map[string][]claim{}
		news, replays := 0, 0
		for _, c := range claims {
			if c.isNew {
				byKey[c.key] = append(byKey[c.key], c)
				news++
			}
		}
		for key, cs := range byKey {
			for i := range cs {
				for j := i + 1; j < len(cs); j++ {
					if span := time.Duration(max(cs[i].end, cs[j].end) - min(cs[i].start, cs[j].start)); span < period {
						t.Errorf("key %s found new twice within %v (a period is %v)", key, span, period)
					}
				}
			}
		}
		for _, c := range claims {
			if c.isNew {
				continue
			}
			replays++
			held := false // by a new claim of the key less than two periods before
			for _, n := range byKey[c.key] {
				if n.start <= c.end && time.Duration(c.start-n.end) < 2*period {
					held = true
				}
			}
			if !held {
				t.Errorf("key %s replayed by a claim that started more than two periods after every new claim of it", c.key)
			}
		}
		if dropped.Load() == 0 {
			t.Error("RollKeys dropped no partition in the run")
		}
		if n := leftTables(t, env); n != 0 {
			t.Errorf("%d tables of dropped partitions left behind", n)
		}
		t.Logf("%d new claims and %d replays of %d keys, %d partitions dropped here", news, replays, keys, dropped.Load())
	})
}

// TestKeysEnableUnderLoadKeepsProtection: keys recorded before EnableKeys
// and while it runs (goroutines and a process recording new keys all
// along) are all still refused after it.
func TestKeysEnableUnderLoadKeepsProtection(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		keysSupported(t, env)
		ctx := context.Background()
		k := txn.NewKeys(env.DB, txn.KeysOptions{})
		for i := 0; i < 300; i++ {
			if _, err := record(ctx, env.DB, k, fmt.Sprintf("old-%d", i)); err != nil {
				t.Fatal(err)
			}
		}
		proc := dbtest.Spawn(t, "claimer", "DSN="+env.DSN, "SECONDS=3", "KEYS=100000")
		runCtx, cancel := context.WithCancel(ctx)
		var mu sync.Mutex
		var live []string
		var wg sync.WaitGroup
		errc := make(chan error, 4)
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; runCtx.Err() == nil; i++ {
					key := fmt.Sprintf("live-%d-%d", g, i)
					isNew, err := record(runCtx, env.DB, k, key)
					if err != nil {
						if runCtx.Err() == nil {
							errc <- err
						}
						return
					}
					if !isNew {
						errc <- fmt.Errorf("key %s was not new", key)
						return
					}
					mu.Lock()
					live = append(live, key)
					mu.Unlock()
				}
			}()
		}
		time.Sleep(300 * time.Millisecond)
		if err := partitions.EnableKeys(ctx, env.DB, partitions.KeysOptions{Period: 20 * time.Second, Ahead: 1}); err != nil {
			t.Fatalf("EnableKeys under load: %v", err)
		}
		time.Sleep(300 * time.Millisecond)
		cancel()
		wg.Wait()
		var procKeys []string
		for {
			l := proc.WaitLine(t, "", 2*time.Minute)
			if l == "DONE" {
				break
			}
			if f := strings.Fields(l); f[0] == "NEW" {
				procKeys = append(procKeys, f[1])
			}
		}
		close(errc)
		for err := range errc {
			t.Fatal(err)
		}
		all := slices.Concat(live, procKeys)
		for i := 0; i < 300; i++ {
			all = append(all, fmt.Sprintf("old-%d", i))
		}
		for _, key := range all {
			isNew, err := record(ctx, env.DB, k, key)
			if err != nil {
				t.Fatal(err)
			}
			if isNew {
				t.Fatalf("key %s, recorded before or during EnableKeys, was new again after it", key)
			}
		}
		l, err := partitions.KeysStatus(ctx, env.DB)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%d keys refused again (%d while enabling); %d partitions, period %v", len(all), len(live)+len(procKeys), len(l.Parts), l.Period)
	})
}

// TestKeysPartitionedTwoPhase: Begin/Complete, Start/Finish, Abandon and
// the takeover of a stale pending key work on the partitioned table as on
// the plain one.
func TestKeysPartitionedTwoPhase(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		keysSupported(t, env)
		ctx := context.Background()
		if err := partitions.EnableKeys(ctx, env.DB, partitions.KeysOptions{Period: time.Hour}); err != nil {
			t.Fatal(err)
		}
		k := txn.NewKeys(env.DB, txn.KeysOptions{})
		t.Run("start, finish, replay", func(t *testing.T) {
			if c, err := k.Start(ctx, "s", "a", []byte("f")); err != nil || c.Replay || c.Recovered {
				t.Fatalf("Start: %+v %v", c, err)
			}
			if c, err := k.Start(ctx, "s", "a", []byte("f")); !errors.Is(err, txn.ErrInProgress) {
				t.Fatalf("second Start while pending: %+v %v", c, err)
			}
			if err := k.Finish(ctx, "s", "a", []byte("done")); err != nil {
				t.Fatal(err)
			}
			if c, err := k.Start(ctx, "s", "a", []byte("f")); err != nil || !c.Replay || string(c.Response) != "done" {
				t.Fatalf("Start after Finish: %+v %v", c, err)
			}
			if _, err := k.Start(ctx, "s", "a", []byte("other")); !errors.Is(err, txn.ErrKeyReused) {
				t.Fatalf("another fingerprint: %v", err)
			}
		})
		t.Run("abandon lets a retry run", func(t *testing.T) {
			if _, err := k.Start(ctx, "s", "b", nil); err != nil {
				t.Fatal(err)
			}
			if err := k.Abandon(ctx, "s", "b"); err != nil {
				t.Fatal(err)
			}
			if c, err := k.Start(ctx, "s", "b", nil); err != nil || c.Replay || c.Recovered {
				t.Fatalf("Start after Abandon: %+v %v", c, err)
			}
		})
		t.Run("a stale pending key is recovered", func(t *testing.T) {
			k := txn.NewKeys(env.DB, txn.KeysOptions{LockFor: 50 * time.Millisecond})
			if _, err := k.Start(ctx, "s", "c", nil); err != nil {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond)
			if c, err := k.Start(ctx, "s", "c", nil); err != nil || !c.Recovered {
				t.Fatalf("Start of a stale key: %+v %v", c, err)
			}
		})
		t.Run("begin and complete in one transaction", func(t *testing.T) {
			tx, err := env.DB.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if c, err := k.Begin(ctx, tx, "s", "d", []byte("fp")); err != nil || c.Replay {
				t.Fatalf("Begin: %+v %v", c, err)
			}
			if err := k.Complete(ctx, tx, "s", "d", []byte("r-d")); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			isNew, err := record(ctx, env.DB, txn.NewKeys(env.DB, txn.KeysOptions{}), "d")
			if err != nil || isNew {
				t.Fatalf("Record of a completed key: new %v, %v", isNew, err)
			}
		})
	})
}

// TestKeysOptions: status of a plain table, options out of range,
// enabling twice.
func TestKeysOptions(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		keysSupported(t, env)
		ctx := context.Background()
		t.Run("a plain table is not partitioned", func(t *testing.T) {
			if _, err := partitions.KeysStatus(ctx, env.DB); !errors.Is(err, partitions.ErrKeysNotPartitioned) {
				t.Fatalf("KeysStatus: %v", err)
			}
		})
		t.Run("options out of range are refused", func(t *testing.T) {
			for _, o := range []partitions.KeysOptions{{}, {Period: -time.Hour}, {Period: time.Millisecond}, {Period: time.Hour, Ahead: -1}, {Period: 400 * 24 * time.Hour}} {
				if err := partitions.EnableKeys(ctx, env.DB, o); !errors.Is(err, partitions.ErrInvalid) {
					t.Errorf("%+v: %v", o, err)
				}
			}
			if _, err := partitions.RollKeys(ctx, env.DB, partitions.KeysOptions{Ahead: 101}); !errors.Is(err, partitions.ErrInvalid) {
				t.Errorf("RollKeys ahead 101: %v", err)
			}
		})
		t.Run("enabled twice", func(t *testing.T) {
			if err := partitions.EnableKeys(ctx, env.DB, partitions.KeysOptions{Period: time.Hour}); err != nil {
				t.Fatal(err)
			}
			if err := partitions.EnableKeys(ctx, env.DB, partitions.KeysOptions{Period: time.Hour}); !errors.Is(err, partitions.ErrKeysPartitioned) {
				t.Fatalf("second EnableKeys: %v", err)
			}
			l, err := partitions.KeysStatus(ctx, env.DB)
			if err != nil {
				t.Fatal(err)
			}
			if l.Period != time.Hour || len(l.Parts) < 3 {
				t.Fatalf("status: %+v", l)
			}
		})
	})
}

// TestKeysLayoutHintWrongEitherWay: a claim told the wrong layout of the
// keys' table (dialects.IdemKey.Table, which Keys keeps from its last
// claim: stale after EnableKeys, or after a restore to before it) still
// writes a new key and refuses a duplicate, and reports the layout it
// found.
func TestKeysLayoutHintWrongEitherWay(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		keysSupported(t, env)
		ctx := context.Background()
		d := env.DB.Dialect()
		hints := []dialects.KeyTable{dialects.KeyTableUnknown, dialects.KeyTablePlain, dialects.KeyTablePartitioned}
		claim := func(t *testing.T, key string, hint dialects.KeyTable, done bool) dialects.IdemResult {
			t.Helper()
			tx, err := env.DB.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			k := dialects.IdemKey{Scope: "hint", Key: key, Fingerprint: []byte("f"), LockMicros: 1e6, Table: hint}
			var r dialects.IdemResult
			if done {
				r, err = d.IdemRecord(ctx, env.DB.TxExecutor(tx), k, []byte("r"))
			} else {
				r, err = d.IdemInsert(ctx, env.DB.TxExecutor(tx), k)
			}
			if err != nil {
				t.Fatalf("claim %s (hint %d): %v", key, hint, err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			return r
		}
		check := func(t *testing.T, layout dialects.KeyTable) {
			for _, hint := range hints {
				for _, done := range []bool{false, true} {
					key := fmt.Sprintf("l%d-h%d-%v", layout, hint, done)
					if r := claim(t, key, hint, done); !r.Inserted || r.Table != layout {
						t.Errorf("new key %s with hint %d: %+v, want inserted into layout %d", key, hint, r, layout)
					}
					for _, again := range hints {
						if r := claim(t, key, again, done); r.Inserted {
							t.Errorf("key %s claimed again with hint %d: %+v", key, again, r)
						}
					}
				}
			}
		}
		t.Run("plain table", func(t *testing.T) { check(t, dialects.KeyTablePlain) })
		if err := partitions.EnableKeys(ctx, env.DB, partitions.KeysOptions{Period: time.Hour}); err != nil {
			t.Fatal(err)
		}
		t.Run("partitioned table", func(t *testing.T) { check(t, dialects.KeyTablePartitioned) })
		t.Run("keys recorded on the plain table stay refused", func(t *testing.T) {
			for _, hint := range hints {
				if r := claim(t, "l1-h0-true", hint, true); r.Inserted {
					t.Errorf("hint %d: a key of the plain table was new again: %+v", hint, r)
				}
			}
		})
	})
}

// leftTables counts the tables besides coord_idempotency that hold keys
// (MariaDB's drops move a partition's rows into one before dropping it).
func leftTables(t *testing.T, env *dbtest.Env) int {
	t.Helper()
	if env.DB.Dialect().Family() != "mysql" {
		return 0
	}
	var n int
	if err := env.DB.QueryRowContext(context.Background(), `SELECT COUNT(*) FROM information_schema.TABLES
WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME LIKE 'coord\\_idempotency\\_%'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
