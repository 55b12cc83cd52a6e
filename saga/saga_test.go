package saga_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/metrics"
	"github.com/sqlcoord/sqlcoord/saga"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
	"github.com/sqlcoord/sqlcoord/txn"
)

// journal records the calls branch functions receive, in order.
type journal struct {
	mu    sync.Mutex
	calls []string
}

func (j *journal) add(c saga.Call) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.calls = append(j.calls, c.Branch+"."+string(c.Op))
}

func (j *journal) String() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return strings.Join(j.calls, " ")
}

// fast are driver options for tests: short lease, quick retries.
func fast() saga.Options {
	return saga.Options{Owner: "test", Lease: 2 * time.Second, CallTimeout: 500 * time.Millisecond, Poll: 10 * time.Millisecond,
		RetryBase: 5 * time.Millisecond, RetryMax: 50 * time.Millisecond, StuckAfter: 3}
}

func newCoord(t *testing.T, db *sqlcoord.DB, o saga.Options) *saga.Coordinator[*sql.Tx] {
	t.Helper()
	c, err := saga.New(db, o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// begin records g in a committed transaction.
func begin(t *testing.T, db *sqlcoord.DB, c *saga.Coordinator[*sql.Tx], g saga.Global) string {
	t.Helper()
	ctx := context.Background()
	var gid string
	err := txn.Do(ctx, db, txn.Options{}, func(ctx context.Context, tx *sql.Tx) error {
		var err error
		gid, err = c.Begin(ctx, tx, g)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return gid
}

// runUntilEnded drives due transactions until gid has ended.
func runUntilEnded(t *testing.T, c *saga.Coordinator[*sql.Tx], gid string) saga.Info {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := c.RunDue(ctx); err != nil {
			t.Fatal(err)
		}
		in, err := c.Get(ctx, gid)
		if err != nil {
			t.Fatal(err)
		}
		if in.Status.Ended() || in.Stuck {
			return in
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not end: %+v", gid, in)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func branches(names ...string) []saga.Branch {
	var bs []saga.Branch
	for _, n := range names {
		bs = append(bs, saga.Branch{Name: n, Target: "fn", Payload: []byte(n)})
	}
	return bs
}

func TestSaga(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		t.Run("every action runs in order", func(t *testing.T) {
			c := newCoord(t, env.DB, fast())
			var j journal
			c.Register("fn", func(ctx context.Context, call saga.Call) error { j.add(call); return nil })
			gid := begin(t, env.DB, c, saga.Global{Mode: saga.ModeSaga, Branches: branches("a", "b", "c")})
			in := runUntilEnded(t, c, gid)
			if in.Status != saga.Succeeded || j.String() != "a.action b.action c.action" {
				t.Fatalf("status %s, calls %s", in.Status, j.String())
			}
			for _, b := range in.Branches {
				if b.Status != "done" {
					t.Fatalf("branch %+v", b)
				}
			}
		})
		t.Run("a business failure compensates in reverse order", func(t *testing.T) {
			c := newCoord(t, env.DB, fast())
			var j journal
			c.Register("fn", func(ctx context.Context, call saga.Call) error {
				j.add(call)
				if call.Branch == "c" && call.Op == txn.OpAction {
					return saga.Fail(errors.New("out of stock"))
				}
				return nil
			})
			gid := begin(t, env.DB, c, saga.Global{Mode: saga.ModeSaga, Branches: branches("a", "b", "c", "d")})
			in := runUntilEnded(t, c, gid)
			want := "a.action b.action c.action c.compensate b.compensate a.compensate"
			if in.Status != saga.Aborted || j.String() != want {
				t.Fatalf("status %s, calls %s, want %s", in.Status, j.String(), want)
			}
			if !strings.Contains(in.Reason, "out of stock") || in.Branches[3].Status != "pending" {
				t.Fatalf("reason %q, branches %+v", in.Reason, in.Branches)
			}
		})
		t.Run("retryable failures are retried", func(t *testing.T) {
			c := newCoord(t, env.DB, fast())
			var j journal
			fails := 2
			c.Register("fn", func(ctx context.Context, call saga.Call) error {
				j.add(call)
				if call.Branch == "b" && fails > 0 {
					fails--
					return errors.New("connection refused")
				}
				return nil
			})
			gid := begin(t, env.DB, c, saga.Global{Mode: saga.ModeSaga, Branches: branches("a", "b")})
			in := runUntilEnded(t, c, gid)
			if in.Status != saga.Succeeded || j.String() != "a.action b.action b.action b.action" {
				t.Fatalf("status %s, calls %s", in.Status, j.String())
			}
		})
		t.Run("the timeout compensates a step that keeps failing", func(t *testing.T) {
			c := newCoord(t, env.DB, fast())
			var j journal
			c.Register("fn", func(ctx context.Context, call saga.Call) error {
				j.add(call)
				if call.Branch == "b" && call.Op == txn.OpAction {
					return errors.New("service unavailable")
				}
				return nil
			})
			gid := begin(t, env.DB, c, saga.Global{Mode: saga.ModeSaga, Branches: branches("a", "b"), Timeout: 300 * time.Millisecond})
			in := runUntilEnded(t, c, gid)
			if in.Status != saga.Aborted || !strings.HasSuffix(j.String(), "b.action b.compensate a.compensate") || !strings.Contains(in.Reason, "timeout") {
				t.Fatalf("status %s, reason %q, calls %s", in.Status, in.Reason, j.String())
			}
		})
		t.Run("a rolled-back Begin leaves nothing to drive", func(t *testing.T) {
			c := newCoord(t, env.DB, fast())
			called := false
			c.Register("fn", func(ctx context.Context, call saga.Call) error { called = true; return nil })
			tx, err := env.DB.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			gid, err := c.Begin(ctx, tx, saga.Global{Mode: saga.ModeSaga, Branches: branches("a")})
			if err != nil {
				t.Fatal(err)
			}
			tx.Rollback()
			if n, err := c.RunDue(ctx); err != nil || n != 0 || called {
				t.Fatalf("claimed %d (%v), called %v", n, err, called)
			}
			if _, err := c.Get(ctx, gid); !errors.Is(err, saga.ErrNotFound) {
				t.Fatalf("Get of a rolled-back gid: %v", err)
			}
		})
		t.Run("a gid begins once", func(t *testing.T) {
			c := newCoord(t, env.DB, fast())
			begin(t, env.DB, c, saga.Global{GID: "order-1", Mode: saga.ModeSaga, Branches: branches("a")})
			err := txn.Do(ctx, env.DB, txn.Options{}, func(ctx context.Context, tx *sql.Tx) error {
				_, err := c.Begin(ctx, tx, saga.Global{GID: "order-1", Mode: saga.ModeSaga, Branches: branches("a")})
				return err
			})
			if !errors.Is(err, sqlcoord.ErrDuplicate) {
				t.Fatalf("second Begin: %v", err)
			}
			// Byte for byte: a trailing space is another gid.
			begin(t, env.DB, c, saga.Global{GID: "order-1 ", Mode: saga.ModeSaga, Branches: branches("a")})
		})
	})
}

func TestTCC(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		t.Run("every try succeeds: confirm all", func(t *testing.T) {
			c := newCoord(t, env.DB, fast())
			var j journal
			c.Register("fn", func(ctx context.Context, call saga.Call) error { j.add(call); return nil })
			gid := begin(t, env.DB, c, saga.Global{Mode: saga.ModeTCC, Branches: branches("a", "b")})
			in := runUntilEnded(t, c, gid)
			if in.Status != saga.Succeeded || j.String() != "a.try b.try a.confirm b.confirm" {
				t.Fatalf("status %s, calls %s", in.Status, j.String())
			}
			if in.Branches[0].Status != "confirmed" {
				t.Fatalf("branches %+v", in.Branches)
			}
		})
		t.Run("a try fails: cancel what was tried, in reverse", func(t *testing.T) {
			c := newCoord(t, env.DB, fast())
			var j journal
			c.Register("fn", func(ctx context.Context, call saga.Call) error {
				j.add(call)
				if call.Branch == "b" && call.Op == txn.OpTry {
					return saga.Fail(errors.New("insufficient funds"))
				}
				return nil
			})
			gid := begin(t, env.DB, c, saga.Global{Mode: saga.ModeTCC, Branches: branches("a", "b", "c")})
			in := runUntilEnded(t, c, gid)
			if in.Status != saga.Aborted || j.String() != "a.try b.try b.cancel a.cancel" {
				t.Fatalf("status %s, calls %s", in.Status, j.String())
			}
		})
		t.Run("a confirm that keeps failing is stuck, then retried", func(t *testing.T) {
			c := newCoord(t, env.DB, fast())
			var mu sync.Mutex
			broken := true
			c.Register("fn", func(ctx context.Context, call saga.Call) error {
				mu.Lock()
				defer mu.Unlock()
				if call.Op == txn.OpConfirm && broken {
					return errors.New("ledger service down")
				}
				return nil
			})
			gid := begin(t, env.DB, c, saga.Global{Mode: saga.ModeTCC, Branches: branches("a")})
			in := runUntilEnded(t, c, gid)
			if !in.Stuck || in.Status != saga.Confirming || !strings.Contains(in.Reason, "3 times") || !strings.Contains(in.LastErr, "ledger service down") {
				t.Fatalf("%+v", in)
			}
			stuck, err := saga.List(context.Background(), env.DB, saga.Stuck, 10)
			if err != nil || len(stuck) != 1 || stuck[0].GID != gid {
				t.Fatalf("stuck list %v %v", stuck, err)
			}
			if n, _ := c.RunDue(context.Background()); n != 0 {
				t.Fatalf("a driver claimed a stuck transaction")
			}
			mu.Lock()
			broken = false
			mu.Unlock()
			if err := saga.Retry(context.Background(), env.DB, gid); err != nil {
				t.Fatal(err)
			}
			if in := runUntilEnded(t, c, gid); in.Status != saga.Succeeded {
				t.Fatalf("after retry: %+v", in)
			}
			if err := saga.Retry(context.Background(), env.DB, gid); !errors.Is(err, saga.ErrNotStuck) {
				t.Fatalf("retry of an ended transaction: %v", err)
			}
		})
		t.Run("a refused cancel is stuck until resolved", func(t *testing.T) {
			c := newCoord(t, env.DB, fast())
			c.Register("fn", func(ctx context.Context, call saga.Call) error {
				switch {
				case call.Branch == "b" && call.Op == txn.OpTry:
					return saga.Fail(errors.New("no"))
				case call.Op == txn.OpCancel && call.Branch == "a":
					return saga.Fail(errors.New("cannot unfreeze: account closed"))
				}
				return nil
			})
			gid := begin(t, env.DB, c, saga.Global{Mode: saga.ModeTCC, Branches: branches("a", "b")})
			in := runUntilEnded(t, c, gid)
			if !in.Stuck || in.Status != saga.Compensating || !strings.Contains(in.Reason, "account closed") {
				t.Fatalf("%+v", in)
			}
			if err := saga.Resolve(context.Background(), env.DB, gid, "refunded by hand, ticket 42"); err != nil {
				t.Fatal(err)
			}
			in, _ = c.Get(context.Background(), gid)
			if in.Status != saga.Resolved || in.Stuck || !strings.HasPrefix(in.Reason, "branch b: try failed: no; then branch a: cancel refused") || !strings.HasSuffix(in.Reason, "; then resolved: refunded by hand, ticket 42") {
				t.Fatalf("%+v", in)
			}
		})
	})
}

func TestTakeoverIsFenced(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		o := fast()
		o.Lease, o.CallTimeout = 600*time.Millisecond, 300*time.Millisecond
		frozen := newCoord(t, env.DB, o)
		o.Owner = "taker"
		taker := newCoord(t, env.DB, o)
		var j journal
		release := make(chan struct{})
		// The frozen driver's function ignores its context and returns
		// success long after the lease: a process stopped mid-call.
		entered := make(chan struct{}, 1)
		frozen.Register("fn", func(ctx context.Context, call saga.Call) error {
			entered <- struct{}{}
			<-release
			j.add(saga.Call{Branch: "frozen-" + call.Branch, Op: call.Op})
			return nil
		})
		taker.Register("fn", func(ctx context.Context, call saga.Call) error {
			j.add(call)
			if call.Branch == "b" && call.Op == txn.OpAction {
				return saga.Fail(errors.New("refused"))
			}
			return nil
		})
		gid := begin(t, env.DB, frozen, saga.Global{Mode: saga.ModeSaga, Branches: branches("a", "b")})
		done := make(chan struct{})
		go func() { frozen.RunDue(ctx); close(done) }()
		<-entered // the frozen driver holds the claim and is "stopped" in its call
		time.Sleep(o.Lease + 200*time.Millisecond)
		in := runUntilEnded(t, taker, gid)
		if in.Status != saga.Aborted || in.Attempt != 2 {
			t.Fatalf("taker: %+v", in)
		}
		close(release)
		<-done
		after, _ := taker.Get(ctx, gid)
		if after.Status != saga.Aborted || after.Updated != in.Updated || after.Branches[0].Status != "undone" {
			t.Fatalf("the frozen driver changed the transaction after losing it: %+v", after)
		}
	})
}

func TestBadInput(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		c := newCoord(t, env.DB, fast())
		ok := saga.Branch{Name: "a", Target: "fn"}
		cases := map[string]saga.Global{
			"no branches":              {Mode: saga.ModeSaga},
			"unknown mode":             {Mode: "xa", Branches: []saga.Branch{ok}},
			"gid not UTF-8":            {GID: "g\xff", Mode: saga.ModeSaga, Branches: []saga.Branch{ok}},
			"gid with NUL":             {GID: "g\x00", Mode: saga.ModeSaga, Branches: []saga.Branch{ok}},
			"gid too long":             {GID: strings.Repeat("g", 129), Mode: saga.ModeSaga, Branches: []saga.Branch{ok}},
			"negative timeout":         {Mode: saga.ModeSaga, Branches: []saga.Branch{ok}, Timeout: -time.Second},
			"branch name twice":        {Mode: saga.ModeSaga, Branches: []saga.Branch{ok, ok}},
			"empty branch name":        {Mode: saga.ModeSaga, Branches: []saga.Branch{{Target: "fn"}}},
			"empty target":             {Mode: saga.ModeSaga, Branches: []saga.Branch{{Name: "a"}}},
			"function with space":      {Mode: saga.ModeSaga, Branches: []saga.Branch{{Name: "a", Target: "fn "}}},
			"ftp URL":                  {Mode: saga.ModeSaga, Branches: []saga.Branch{{Name: "a", Target: "ftp://h/x"}}},
			"URL without host":         {Mode: saga.ModeSaga, Branches: []saga.Branch{{Name: "a", Target: "http:///x"}}},
			"URL with credentials":     {Mode: saga.ModeSaga, Branches: []saga.Branch{{Name: "a", Target: "https://bob:s3cr3t-pw@h/x"}}},
			"URL with a token":         {Mode: saga.ModeSaga, Branches: []saga.Branch{{Name: "a", Target: "https://h/x?token=s3cr3t-pw"}}},
			"payload over the maximum": {Mode: saga.ModeSaga, Branches: []saga.Branch{{Name: "a", Target: "fn", Payload: make([]byte, saga.MaxPayload+1)}}},
		}
		for name, g := range cases {
			t.Run(name, func(t *testing.T) {
				tx, err := env.DB.BeginTx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer tx.Rollback()
				_, err = c.Begin(ctx, tx, g)
				if !errors.Is(err, saga.ErrInvalid) {
					t.Fatalf("Begin: %v, want ErrInvalid", err)
				}
				if strings.Contains(err.Error(), "s3cr3t-pw") {
					t.Fatalf("the error shows the password: %v", err)
				}
				// The caller's transaction is still usable.
				if err := tx.QueryRowContext(ctx, "SELECT 1").Scan(new(int)); err != nil {
					t.Fatalf("the transaction broke: %v", err)
				}
			})
		}
		t.Run("options", func(t *testing.T) {
			for name, o := range map[string]saga.Options{
				"negative lease":         {Lease: -time.Second},
				"lease below call":       {Lease: time.Second, CallTimeout: 2 * time.Second},
				"negative workers":       {Workers: -1},
				"owner not UTF-8":        {Owner: "\xfe"},
				"retry max below base":   {RetryBase: time.Second, RetryMax: time.Millisecond},
				"negative poll interval": {Poll: -1},
			} {
				if _, err := saga.New(env.DB, o); !errors.Is(err, saga.ErrInvalid) {
					t.Errorf("%s: %v", name, err)
				}
			}
		})
		t.Run("register", func(t *testing.T) {
			for _, name := range []string{"", "http://x/y", "f\xff", "f "} {
				if err := c.Register(name, func(context.Context, saga.Call) error { return nil }); !errors.Is(err, saga.ErrInvalid) {
					t.Errorf("Register(%q): %v", name, err)
				}
			}
			if err := c.Register("f", nil); !errors.Is(err, saga.ErrInvalid) {
				t.Errorf("Register nil: %v", err)
			}
		})
		t.Run("operators", func(t *testing.T) {
			if _, err := saga.Get(ctx, env.DB, "nope"); !errors.Is(err, saga.ErrNotFound) {
				t.Errorf("Get: %v", err)
			}
			if err := saga.Retry(ctx, env.DB, "nope"); !errors.Is(err, saga.ErrNotFound) {
				t.Errorf("Retry: %v", err)
			}
			if err := saga.Resolve(ctx, env.DB, "nope", ""); !errors.Is(err, saga.ErrInvalid) {
				t.Errorf("Resolve without a reason: %v", err)
			}
			if _, err := saga.List(ctx, env.DB, "bogus", 1); !errors.Is(err, saga.ErrInvalid) {
				t.Errorf("List: %v", err)
			}
			if _, err := saga.Cleanup(ctx, env.DB, -time.Second, 10); err == nil {
				t.Errorf("Cleanup with a negative age succeeded")
			}
		})
		t.Run("an unknown function is retried, not lost", func(t *testing.T) {
			c := newCoord(t, env.DB, fast())
			gid := begin(t, env.DB, c, saga.Global{Mode: saga.ModeSaga, Branches: []saga.Branch{{Name: "a", Target: "missing"}}})
			c.RunDue(ctx)
			in, err := c.Get(ctx, gid)
			if err != nil || in.Status != saga.Running || !strings.Contains(in.LastErr, "no function registered") {
				t.Fatalf("%+v %v", in, err)
			}
		})
	})
}

func TestNoSchema(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		c := newCoord(t, env.DB, fast())
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.Run(ctx); !errors.Is(err, sqlcoord.ErrNoSchema) {
			t.Fatalf("Run without the schema: %v", err)
		}
		tx, _ := env.DB.BeginTx(ctx, nil)
		defer tx.Rollback()
		if _, err := c.Begin(ctx, tx, saga.Global{Mode: saga.ModeSaga, Branches: branches("a")}); !errors.Is(err, sqlcoord.ErrNoSchema) {
			t.Fatalf("Begin without the schema: %v", err)
		}
	}, dbtest.NoMigrate())
}

func TestCleanup(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		c := newCoord(t, env.DB, fast())
		c.Register("fn", func(context.Context, saga.Call) error { return nil })
		for i := range 5 {
			begin(t, env.DB, c, saga.Global{GID: fmt.Sprint("g", i), Mode: saga.ModeSaga, Branches: branches("a", "b")})
		}
		c.RunDue(ctx)
		live := begin(t, env.DB, c, saga.Global{Mode: saga.ModeSaga, Branches: branches("a")})
		n, err := saga.Cleanup(ctx, env.DB, 0, 2)
		if err != nil || n != 5 {
			t.Fatalf("cleanup: %d %v", n, err)
		}
		if got := dbtest.Count(t, env.DB, "SELECT COUNT(*) FROM coord_gtx_branches"); got != 1 {
			t.Fatalf("%d branch rows left, want 1 (the live transaction's)", got)
		}
		if _, err := c.Get(ctx, live); err != nil {
			t.Fatal(err)
		}
	})
}

func TestDrive(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		c := newCoord(t, env.DB, fast())
		var j journal
		c.Register("fn", func(ctx context.Context, call saga.Call) error { j.add(call); return nil })
		t.Run("drives the transaction just begun, to its end", func(t *testing.T) {
			gid := begin(t, env.DB, c, saga.Global{Mode: saga.ModeTCC, Branches: branches("a", "b")})
			st, err := c.Drive(ctx, gid)
			if err != nil || st != saga.Succeeded {
				t.Fatalf("%s %v", st, err)
			}
		})
		t.Run("leaves alone a transaction another driver holds", func(t *testing.T) {
			other := newCoord(t, env.DB, fast())
			hold := make(chan struct{})
			held := make(chan struct{})
			other.Register("fn", func(ctx context.Context, call saga.Call) error { close(held); <-hold; return nil })
			gid := begin(t, env.DB, c, saga.Global{Mode: saga.ModeSaga, Branches: branches("x")})
			done := make(chan struct{})
			go func() { other.Drive(ctx, gid); close(done) }()
			<-held
			calls := j.String()
			st, err := c.Drive(ctx, gid)
			if err != nil || st != saga.Running || j.String() != calls {
				t.Fatalf("%s %v; calls %s", st, err, j.String())
			}
			close(hold)
			<-done
			if in, _ := c.Get(ctx, gid); in.Status != saga.Succeeded {
				t.Fatalf("%+v", in)
			}
		})
		t.Run("an unknown gid", func(t *testing.T) {
			if _, err := c.Drive(ctx, "nope"); !errors.Is(err, saga.ErrNotFound) {
				t.Fatalf("%v", err)
			}
			if _, err := c.Drive(ctx, ""); !errors.Is(err, saga.ErrInvalid) {
				t.Fatalf("%v", err)
			}
		})
	})
}

// TestLostRecordsAreDrivenAgain: a driver's relaxed records (PostgreSQL
// commits them without waiting for the WAL flush) may be lost in a crash
// of the database. Rewinding a finished transaction to its last durable
// record — what such a crash leaves — and driving it again ends it the
// same way, and the participants' barrier applies nothing twice.
func TestLostRecordsAreDrivenAgain(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		dbtest.Exec(t, env.DB, `CREATE TABLE effects (gid VARCHAR(128) NOT NULL, branch VARCHAR(16) NOT NULL, op VARCHAR(16) NOT NULL)`)
		ph := env.DB.Dialect().Placeholder
		c := newCoord(t, env.DB, fast())
		c.Register("fn", saga.BarrierFunc(txn.NewBarrier(env.DB), func(ctx context.Context, tx *sql.Tx, call saga.Call) error {
			if call.Branch == "no" && (call.Op == txn.OpAction || call.Op == txn.OpTry) {
				return saga.Fail(errors.New("refused"))
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO effects (gid, branch, op) VALUES (`+ph(1)+`, `+ph(2)+`, `+ph(3)+`)`, call.GID, call.Branch, string(call.Op))
			return err
		}))
		rewind := func(gid string, status saga.Status, step int) {
			dbtest.Exec(t, env.DB, `UPDATE coord_gtx SET status = `+ph(1)+`, step = `+ph(2)+`, claim = NULL, due_at = `+env.DB.Dialect().Q().Saga.Now+` WHERE gid = `+ph(3), string(status), step, gid)
		}
		for _, tc := range []struct {
			name     string
			g        saga.Global
			end      saga.Status
			rewindTo saga.Status
			step     int
		}{
			{"TCC confirmed, back to confirming", saga.Global{Mode: saga.ModeTCC, Branches: branches("a", "b")}, saga.Succeeded, saga.Confirming, 0},
			{"TCC cancelled, back to cancelling", saga.Global{Mode: saga.ModeTCC, Branches: branches("a", "no")}, saga.Aborted, saga.Compensating, 1},
			{"saga compensated, back to compensating", saga.Global{Mode: saga.ModeSaga, Branches: branches("a", "no")}, saga.Aborted, saga.Compensating, 1},
			{"saga succeeded, back to its last action", saga.Global{Mode: saga.ModeSaga, Branches: branches("a", "b")}, saga.Succeeded, saga.Running, 1},
		} {
			t.Run(tc.name, func(t *testing.T) {
				gid := begin(t, env.DB, c, tc.g)
				if st, err := c.Drive(ctx, gid); err != nil || st != tc.end {
					t.Fatalf("first drive: %s %v", st, err)
				}
				effects := dbtest.Count(t, env.DB, `SELECT COUNT(*) FROM effects WHERE gid = `+ph(1), gid)
				rewind(gid, tc.rewindTo, tc.step)
				if st, err := c.Drive(ctx, gid); err != nil || st != tc.end {
					t.Fatalf("driven again: %s %v", st, err)
				}
				if again := dbtest.Count(t, env.DB, `SELECT COUNT(*) FROM effects WHERE gid = `+ph(1), gid); again != effects {
					t.Fatalf("%d effects after driving again, %d before", again, effects)
				}
			})
		}
	})
}

// Begin works in the caller's transaction at every isolation level, and
// the transaction it records runs to its end.
func TestBeginAtEveryIsolationLevel(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		c := newCoord(t, env.DB, fast())
		c.Register("fn", func(context.Context, saga.Call) error { return nil })
		for _, lvl := range []sql.IsolationLevel{sql.LevelReadUncommitted, sql.LevelReadCommitted, sql.LevelRepeatableRead, sql.LevelSerializable} {
			t.Run(lvl.String(), func(t *testing.T) {
				tx, err := env.DB.BeginTx(ctx, &sql.TxOptions{Isolation: lvl})
				if err != nil {
					t.Fatal(err)
				}
				gid, err := c.Begin(ctx, tx, saga.Global{Mode: saga.ModeTCC, Branches: branches("a", "b")})
				if err != nil {
					tx.Rollback()
					t.Fatal(err)
				}
				if err := tx.Commit(); err != nil {
					t.Fatal(err)
				}
				if st, err := c.Drive(ctx, gid); err != nil || st != saga.Succeeded {
					t.Fatalf("%s %v", st, err)
				}
			})
		}
	})
}

// opsSeen records the ops and outcomes of Call measurements.
type opsSeen struct {
	metrics.Nop
	mu  sync.Mutex
	ops map[string]int
}

func (o *opsSeen) Call(op, dialect, outcome string, d time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ops[op+" "+outcome]++
}

// Every branch call is measured as saga.<op> with its outcome.
func TestBranchCallsAreMeasured(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		rec := &opsSeen{ops: map[string]int{}}
		db := env.Open(t, sqlcoord.Options{Metrics: rec})
		c := newCoord(t, db, fast())
		c.Register("fn", func(ctx context.Context, call saga.Call) error {
			if call.Branch == "b" && call.Op == txn.OpTry {
				return saga.Fail(errors.New("no"))
			}
			return nil
		})
		gid := begin(t, db, c, saga.Global{Mode: saga.ModeTCC, Branches: branches("a", "b")})
		if st, err := c.Drive(context.Background(), gid); err != nil || st != saga.Aborted {
			t.Fatalf("%s %v", st, err)
		}
		rec.mu.Lock()
		defer rec.mu.Unlock()
		if rec.ops["saga.try ok"] != 1 || rec.ops["saga.try error"] != 1 || rec.ops["saga.cancel ok"] != 2 || rec.ops["saga.begin ok"] != 1 {
			t.Fatalf("measured %v", rec.ops)
		}
	})
}

func TestStart(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		o := fast()
		c := newCoord(t, env.DB, o)
		var j journal
		c.Register("fn", func(ctx context.Context, call saga.Call) error { j.add(call); return nil })
		start := func(commit bool) *saga.Started[*sql.Tx] {
			tx, err := env.DB.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			s, err := c.Start(ctx, tx, saga.Global{Mode: saga.ModeTCC, Branches: branches("a", "b")})
			if err != nil {
				t.Fatal(err)
			}
			if commit {
				err = tx.Commit()
			} else {
				err = tx.Rollback()
			}
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		t.Run("committed: driven to its end", func(t *testing.T) {
			s := start(true)
			if n, _ := c.RunDue(ctx); n != 0 {
				t.Fatalf("a driver claimed a started transaction before its lease ended")
			}
			st, err := s.Drive(ctx)
			if err != nil || st != saga.Succeeded || !strings.HasSuffix(j.String(), "a.try b.try a.confirm b.confirm") {
				t.Fatalf("%s %v, calls %s", st, err, j.String())
			}
			if st, err := s.Drive(ctx); err != nil || st != saga.Succeeded {
				t.Fatalf("driven twice: %s %v", st, err)
			}
		})
		t.Run("rolled back: nothing is called", func(t *testing.T) {
			calls := j.String()
			s := start(false)
			if _, err := s.Drive(ctx); !errors.Is(err, saga.ErrNotFound) || j.String() != calls {
				t.Fatalf("%v, calls %s", err, j.String())
			}
		})
		t.Run("never driven: a driver takes it after the lease", func(t *testing.T) {
			s := start(true)
			time.Sleep(o.Lease + 100*time.Millisecond)
			if n, _ := c.RunDue(ctx); n != 1 {
				t.Fatalf("claimed %d after the lease", n)
			}
			in, _ := c.Get(ctx, s.GID())
			if in.Status != saga.Succeeded || in.Attempt != 2 {
				t.Fatalf("%+v", in)
			}
		})
	})
}

// The participant's endpoint refuses what is not a driver's call with 400
// and never runs the business function for it.
func TestHandlerRefusesBadRequests(t *testing.T) {
	// call is a driver's POST to branch b of gid with op and body
	call := func(gid, op, body string) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
		r.Header.Set(saga.HeaderGID, gid)
		r.Header.Set(saga.HeaderBranch, "b")
		r.Header.Set(saga.HeaderOp, op)
		return r
	}
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ran := false
		h := saga.Handler(txn.NewBarrier(env.DB), func(ctx context.Context, tx *sql.Tx, c saga.Call) error { ran = true; return nil })
		for name, r := range map[string]func() *http.Request{
			"GET":               func() *http.Request { return httptest.NewRequest(http.MethodGet, "/", nil) },
			"no headers":        func() *http.Request { return httptest.NewRequest(http.MethodPost, "/", nil) },
			"unknown op":        func() *http.Request { return call("g", "drop", "") },
			"gid not UTF-8":     func() *http.Request { return call("g\xff", "try", "") },
			"payload too large": func() *http.Request { return call("g", "try", strings.Repeat("x", saga.MaxPayload+1)) },
		} {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r())
			if w.Code != http.StatusBadRequest || ran {
				t.Errorf("%s: %d (ran %v), want 400", name, w.Code, ran)
			}
		}
	})
}
