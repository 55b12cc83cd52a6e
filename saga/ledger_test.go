package saga_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/saga"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
	"github.com/sqlcoord/sqlcoord/txn"
)

// The invariant a user of sagas relies on: money moved between two
// participant databases balances once every transaction has ended — the
// total is unchanged, nothing is left frozen, each transfer either moved
// its amount on both sides or on neither — and no branch effect was
// applied twice, whatever the drivers and the participants went through.

const initial = 1_000_000

// bank is a participant service over its own database: side "a" pays,
// side "b" receives. Saga: action/compensate; TCC: try freezes, confirm
// settles, cancel unfreezes.
type bank struct {
	side string
	db   *sqlcoord.DB
	// Faults, as fractions of calls: fail before doing anything, do the
	// work and then answer 500 (the driver calls again), hold the call
	// past the driver's timeout and do the work afterwards (a late
	// Try/Action, possibly after its Cancel/Compensate).
	failBefore, answerTwice, hang float64
	hangFor                       time.Duration
	noBarrier                     bool // the broken participant: no barrier
	calls                         atomic.Int64
}

func newBank(t *testing.T, family, side string) *bank {
	env := dbtest.New(t, family)
	b := &bank{side: side, db: env.DB}
	dbtest.Exec(t, b.db, `CREATE TABLE accounts (id VARCHAR(16) PRIMARY KEY, balance BIGINT NOT NULL, frozen BIGINT NOT NULL)`)
	at := "TIMESTAMPTZ"
	if family == "mysql" {
		at = "DATETIME(6)"
	}
	// at: when the effect committed, by the database clock (the order of
	// a branch's effects).
	dbtest.Exec(t, b.db, `CREATE TABLE journal (gid VARCHAR(128) NOT NULL, branch VARCHAR(64) NOT NULL, op VARCHAR(16) NOT NULL, d_balance BIGINT NOT NULL, d_frozen BIGINT NOT NULL, at `+at+` NOT NULL)`)
	start := 0
	if side == "a" {
		start = initial
	}
	dbtest.Exec(t, b.db, `INSERT INTO accounts (id, balance, frozen) VALUES ('acct', `+strconv.Itoa(start)+`, 0)`)
	return b
}

// effect is what op does to this side's balance and frozen amount.
func (b *bank) effect(op txn.Op, x int64) (bal, frz int64) {
	pay := b.side == "a"
	switch op {
	case txn.OpAction:
		if pay {
			return -x, 0
		}
		return x, 0
	case txn.OpCompensate:
		if pay {
			return x, 0
		}
		return -x, 0
	case txn.OpTry:
		if pay {
			return -x, x
		}
		return 0, x
	case txn.OpConfirm:
		if pay {
			return 0, -x
		}
		return x, -x
	default: // cancel
		if pay {
			return x, -x
		}
		return 0, -x
	}
}

// apply is the branch's business function, in tx.
func (b *bank) apply(ctx context.Context, tx *sql.Tx, c saga.Call) error {
	x, err := strconv.ParseInt(string(c.Payload), 10, 64)
	if err != nil {
		return saga.Fail(err)
	}
	bal, frz := b.effect(c.Op, x)
	ph := b.db.Dialect().Placeholder
	q := `UPDATE accounts SET balance = balance + ` + ph(1) + `, frozen = frozen + ` + ph(2) + ` WHERE id = 'acct'`
	args := []any{bal, frz}
	if bal < 0 && (c.Op == txn.OpAction || c.Op == txn.OpTry) {
		q += ` AND balance >= ` + ph(3)
		args = append(args, -bal)
	}
	res, err := tx.ExecContext(ctx, q, args...)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return saga.Fail(errors.New("insufficient funds"))
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO journal (gid, branch, op, d_balance, d_frozen, at) VALUES (`+ph(1)+`, `+ph(2)+`, `+ph(3)+`, `+ph(4)+`, `+ph(5)+`, `+b.db.Dialect().Q().Saga.Now+`)`,
		c.GID, c.Branch, string(c.Op), bal, frz)
	return err
}

// handler is the bank's HTTP endpoint with its faults.
func (b *bank) handler() http.Handler {
	var inner http.Handler = saga.Handler(txn.NewBarrier(b.db), b.apply)
	if b.noBarrier {
		inner = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			c, err := saga.Request(r)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			err = txn.Do(r.Context(), b.db, txn.Options{}, func(ctx context.Context, tx *sql.Tx) error { return b.apply(ctx, tx, c) })
			switch {
			case errors.Is(err, saga.ErrBusiness):
				http.Error(w, err.Error(), http.StatusConflict)
			case err != nil:
				http.Error(w, "failed", http.StatusInternalServerError)
			}
		})
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.calls.Add(1)
		roll := rand.Float64()
		switch {
		case roll < b.failBefore:
			http.Error(w, "unavailable", http.StatusServiceUnavailable)
			return
		case roll < b.failBefore+b.hang:
			time.Sleep(b.hangFor) // the driver has given up on this call
			inner.ServeHTTP(httptest.NewRecorder(), r.WithContext(context.WithoutCancel(r.Context())))
			return
		case roll < b.failBefore+b.hang+b.answerTwice:
			rec := httptest.NewRecorder()
			inner.ServeHTTP(rec, r)
			if rec.Code == http.StatusOK {
				http.Error(w, "lost answer", http.StatusBadGateway) // done, but the driver cannot know
				return
			}
			w.WriteHeader(rec.Code)
			w.Write(rec.Body.Bytes())
			return
		}
		inner.ServeHTTP(w, r)
	})
}

// transfer is one global transaction the test began.
type transfer struct {
	gid    string
	amount int64
	mode   saga.Mode
}

func transferOf(url1, url2 string, mode saga.Mode, amount int64, timeout time.Duration) saga.Global {
	p := []byte(strconv.FormatInt(amount, 10))
	return saga.Global{Mode: mode, Timeout: timeout, Branches: []saga.Branch{
		{Name: "debit", Target: url1, Payload: p}, {Name: "credit", Target: url2, Payload: p}}}
}

// beginTransfer begins a transfer in a business transaction that also
// writes an order row; rollback undoes both.
func beginTransfer(ctx context.Context, db *sqlcoord.DB, c *saga.Coordinator[*sql.Tx], g saga.Global, rollback bool) (string, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return "", err
	}
	defer tx.Rollback()
	gid, err := c.Begin(ctx, tx, g)
	if err != nil {
		return "", err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO orders (gid) VALUES (`+db.Dialect().Placeholder(1)+`)`, gid); err != nil {
		return "", err
	}
	if rollback {
		return gid, tx.Rollback()
	}
	return gid, tx.Commit()
}

// checkLedger returns what does not balance, or nil.
func checkLedger(ctx context.Context, coordDB *sqlcoord.DB, a, b *bank, done []transfer, rolledBack []string) error {
	var problems []string
	bad := func(f string, args ...any) {
		if len(problems) < 10 {
			problems = append(problems, fmt.Sprintf(f, args...))
		}
	}
	type net struct{ bal, frz int64 }
	nets := map[*bank]map[string]net{}
	var total int64
	for _, bk := range []*bank{a, b} {
		var bal, frz int64
		if err := bk.db.QueryRowContext(ctx, `SELECT balance, frozen FROM accounts WHERE id = 'acct'`).Scan(&bal, &frz); err != nil {
			return err
		}
		total += bal
		if frz != 0 {
			bad("bank %s: %d left frozen", bk.side, frz)
		}
		rows, err := bk.db.QueryContext(ctx, `SELECT gid, branch, op, COUNT(*) FROM journal GROUP BY gid, branch, op HAVING COUNT(*) > 1`)
		if err != nil {
			return err
		}
		for rows.Next() {
			var gid, br, op string
			var n int
			rows.Scan(&gid, &br, &op, &n)
			bad("bank %s: %s %s.%s applied %d times", bk.side, gid, br, op, n)
		}
		rows.Close()
		// A branch's undo applied without its forward effect before it (no
		// empty rollback), or a forward effect after its undo (a suspended
		// Try): each leaves the books balanced only by luck.
		rows, err = bk.db.QueryContext(ctx, `SELECT gid, branch, op FROM journal ORDER BY gid, branch, at`)
		if err != nil {
			return err
		}
		seen := map[string]string{} // gid/branch → ops so far
		for rows.Next() {
			var gid, br, op string
			rows.Scan(&gid, &br, &op)
			k := gid + "/" + br
			prev := seen[k]
			switch txn.Op(op) {
			case txn.OpCancel, txn.OpCompensate:
				if !strings.Contains(prev, "try") && !strings.Contains(prev, "action") {
					bad("bank %s: %s %s.%s applied with no forward effect before it", bk.side, gid, br, op)
				}
			case txn.OpTry, txn.OpAction:
				if strings.Contains(prev, "cancel") || strings.Contains(prev, "compensate") {
					bad("bank %s: %s %s.%s applied after its undo", bk.side, gid, br, op)
				}
			}
			seen[k] = prev + " " + op
		}
		rows.Close()
		nets[bk] = map[string]net{}
		rows, err = bk.db.QueryContext(ctx, `SELECT gid, SUM(d_balance), SUM(d_frozen) FROM journal GROUP BY gid`)
		if err != nil {
			return err
		}
		for rows.Next() {
			var gid string
			var n net
			rows.Scan(&gid, &n.bal, &n.frz)
			nets[bk][gid] = n
		}
		rows.Close()
	}
	if total != initial {
		bad("total %d, want %d", total, initial)
	}
	for _, tr := range done {
		in, err := saga.Get(ctx, coordDB, tr.gid)
		if err != nil {
			bad("%s: %v", tr.gid, err)
			continue
		}
		want := map[*bank]net{a: {}, b: {}}
		switch {
		case in.Status == saga.Succeeded:
			want = map[*bank]net{a: {bal: -tr.amount}, b: {bal: tr.amount}}
		case in.Status != saga.Aborted:
			bad("%s (%s) did not end: %s stuck=%v %s", tr.gid, tr.mode, in.Status, in.Stuck, in.Reason)
			continue
		}
		for bk, w := range want {
			if got := nets[bk][tr.gid]; got != w {
				bad("%s (%s, %s): bank %s moved %+v, want %+v", tr.gid, tr.mode, in.Status, bk.side, got, w)
			}
		}
	}
	for _, gid := range rolledBack {
		if _, err := saga.Get(ctx, coordDB, gid); !errors.Is(err, saga.ErrNotFound) {
			bad("rolled-back %s exists: %v", gid, err)
		}
		if _, ok := nets[a][gid]; ok {
			bad("rolled-back %s reached bank a", gid)
		}
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "\n"))
	}
	return nil
}

// runDriver is a driver process.
func runDriver(ctx context.Context, db *sqlcoord.DB) error {
	o := ledgerOptions(os.Getenv("OWNER"))
	if d, err := time.ParseDuration(os.Getenv("CALL_TIMEOUT")); err == nil {
		o.CallTimeout = d
	}
	c, err := saga.New(db, o)
	if err != nil {
		return err
	}
	fmt.Println("READY")
	return c.Run(ctx)
}

func ledgerOptions(owner string) saga.Options {
	return saga.Options{Owner: owner, Lease: 1500 * time.Millisecond, CallTimeout: 300 * time.Millisecond, Poll: 20 * time.Millisecond,
		RetryBase: 10 * time.Millisecond, RetryMax: 200 * time.Millisecond, StuckAfter: 1000, Workers: 8}
}

func setupOrders(t *testing.T, db *sqlcoord.DB) {
	dbtest.Exec(t, db, `CREATE TABLE orders (gid VARCHAR(128) PRIMARY KEY)`)
}

// waitEnded waits until no transaction is live, failing on a stuck one.
func waitEnded(t *testing.T, db *sqlcoord.DB, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		counts, err := saga.Counts(context.Background(), db)
		if err != nil {
			t.Fatal(err)
		}
		if counts["stuck"] > 0 {
			st, _ := saga.List(context.Background(), db, saga.Stuck, 3)
			t.Fatalf("stuck transactions: %+v", st)
		}
		if counts[string(saga.Running)]+counts[string(saga.Confirming)]+counts[string(saga.Compensating)] == 0 {
			return
		}
		if time.Now().After(deadline) {
			live, _ := saga.List(context.Background(), db, saga.Live, 3)
			t.Fatalf("still live after %v: %v, e.g. %+v", d, counts, live)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestLedgerBalancesUnderFaults: three driver processes SIGKILLed and
// SIGSTOPped at random while producers begin sagas and TCC transfers
// (some rolled back, some refused for insufficient funds), and both
// participant services fail, answer "failed" after doing the work, and
// hold calls past the driver's timeout (late tries after their cancel).
func TestLedgerBalancesUnderFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("fault test")
	}
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		setupOrders(t, env.DB)
		a, b := newBank(t, env.Family, "a"), newBank(t, env.Family, "b")
		for _, bk := range []*bank{a, b} {
			// a hung call outlasts the driver's call timeout (its late try
			// comes after the driver gave up)
			bk.failBefore, bk.answerTwice, bk.hang, bk.hangFor = 0.1, 0.1, 0.05, 1500*time.Millisecond
		}
		// Call timeout 1 s, transaction timeout 20 s: under CI load (-race,
		// every package at once) a bank call took over 300 ms so often that
		// every transfer timed out and aborted ("did not exercise both
		// outcomes"); the faults are the test's, not the machine's.
		const callTimeout = time.Second
		lopt := ledgerOptions("producer")
		lopt.CallTimeout = callTimeout
		srvA, srvB := httptest.NewServer(a.handler()), httptest.NewServer(b.handler())
		defer srvA.Close()
		defer srvB.Close()
		coord := newCoord(t, env.DB, lopt)

		drivers := make([]*dbtest.Proc, 3)
		spawn := func(i int) {
			drivers[i] = dbtest.Spawn(t, "driver", "DSN="+env.DSN, fmt.Sprintf("OWNER=driver-%d", i), "CALL_TIMEOUT="+callTimeout.String())
			drivers[i].WaitLine(t, "READY", 30*time.Second)
		}
		for i := range drivers {
			spawn(i)
		}

		var mu sync.Mutex
		var done []transfer
		var rolledBack []string
		var wg sync.WaitGroup
		for p := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 40 {
					mode := saga.ModeSaga
					if (p+i)%2 == 0 {
						mode = saga.ModeTCC
					}
					amount := int64(1 + rand.IntN(1000))
					if rand.IntN(10) == 0 {
						amount = 2 * initial // refused: compensation
					}
					rollback := rand.IntN(10) == 0
					gid, err := beginTransfer(ctx, env.DB, coord, transferOf(srvA.URL+"/a", srvB.URL+"/b", mode, amount, 20*time.Second), rollback)
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					if rollback {
						rolledBack = append(rolledBack, gid)
					} else {
						done = append(done, transfer{gid: gid, amount: amount, mode: mode})
					}
					mu.Unlock()
					time.Sleep(time.Duration(rand.IntN(60)) * time.Millisecond)
				}
			}()
		}
		// Chaos while the producers run, and a little after.
		kills, stops := 0, 0
		chaosEnd := time.Now().Add(12 * time.Second)
		for time.Now().Before(chaosEnd) {
			time.Sleep(time.Duration(300+rand.IntN(500)) * time.Millisecond)
			i := rand.IntN(len(drivers))
			if rand.IntN(2) == 0 {
				drivers[i].Kill()
				kills++
				spawn(i)
			} else {
				drivers[i].Signal(syscall.SIGSTOP)
				stops++
				time.Sleep(time.Duration(300+rand.IntN(1700)) * time.Millisecond)
				drivers[i].Signal(syscall.SIGCONT)
			}
		}
		wg.Wait()
		waitEnded(t, env.DB, 90*time.Second)
		counts, _ := saga.Counts(ctx, env.DB)
		t.Logf("%d transfers (%d rolled back), %d SIGKILLs, %d SIGSTOPs, calls a=%d b=%d, ended: %v",
			len(done)+len(rolledBack), len(rolledBack), kills, stops, a.calls.Load(), b.calls.Load(), counts)
		if counts[string(saga.Aborted)] == 0 || counts[string(saga.Succeeded)] == 0 {
			t.Errorf("the test did not exercise both outcomes: %v", counts)
		}
		if err := checkLedger(ctx, env.DB, a, b, done, rolledBack); err != nil {
			t.Fatalf("the ledger does not balance:\n%v", err)
		}
	})
}

// TestLedgerCheckFailsWithoutTheBarrier shows that the ledger check
// above can fail: the same faults against participants that apply their
// effect without a barrier leave it unbalanced (a repeated call applied
// twice, a late try after its cancel), while the barrier keeps it whole.
func TestLedgerCheckFailsWithoutTheBarrier(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		for _, noBarrier := range []bool{true, false} {
			t.Run(fmt.Sprintf("noBarrier=%v", noBarrier), func(t *testing.T) {
				ctx := context.Background()
				coordEnv := dbtest.New(t, env.Family)
				setupOrders(t, coordEnv.DB)
				a, b := newBank(t, env.Family, "a"), newBank(t, env.Family, "b")
				for _, bk := range []*bank{a, b} {
					bk.answerTwice, bk.noBarrier = 0.5, noBarrier
				}
				srvA, srvB := httptest.NewServer(a.handler()), httptest.NewServer(b.handler())
				defer srvA.Close()
				defer srvB.Close()
				coord := newCoord(t, coordEnv.DB, ledgerOptions("driver"))
				var done []transfer
				for i := range 10 {
					mode := []saga.Mode{saga.ModeSaga, saga.ModeTCC}[i%2]
					gid, err := beginTransfer(ctx, coordEnv.DB, coord, transferOf(srvA.URL, srvB.URL, mode, 10, time.Minute), false)
					if err != nil {
						t.Fatal(err)
					}
					done = append(done, transfer{gid: gid, amount: 10, mode: mode})
				}
				rctx, cancel := context.WithCancel(ctx)
				defer cancel()
				go coord.Run(rctx)
				waitEnded(t, coordEnv.DB, time.Minute)
				err := checkLedger(ctx, coordEnv.DB, a, b, done, nil)
				if noBarrier && err == nil {
					t.Fatal("the ledger check passed against participants without a barrier")
				}
				if !noBarrier && err != nil {
					t.Fatalf("with the barrier: %v", err)
				}
				t.Logf("check: %v", err)
			})
		}
	})
}

// TestCancelBeforeTry: a participant holds a Try past the driver's call
// timeout and the transaction's deadline, so the driver cancels the
// branch first; when the held Try finally runs, the barrier refuses it
// (nothing stays frozen). Without the barrier the late Try freezes money
// that nothing will ever release — the check must say so.
func TestCancelBeforeTry(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		for _, noBarrier := range []bool{false, true} {
			t.Run(fmt.Sprintf("noBarrier=%v", noBarrier), func(t *testing.T) {
				ctx := context.Background()
				coordEnv := dbtest.New(t, env.Family)
				setupOrders(t, coordEnv.DB)
				a, b := newBank(t, env.Family, "a"), newBank(t, env.Family, "b")
				a.noBarrier, b.noBarrier = noBarrier, noBarrier
				cancelled := make(chan struct{})
				var once sync.Once
				inner := a.handler()
				held := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					switch txn.Op(r.Header.Get(saga.HeaderOp)) {
					case txn.OpTry: // held until its Cancel has been answered, then run anyway
						go func() {
							<-cancelled
							inner.ServeHTTP(httptest.NewRecorder(), r.WithContext(context.WithoutCancel(r.Context())))
						}()
						<-r.Context().Done()
						return
					case txn.OpCancel:
						inner.ServeHTTP(w, r)
						once.Do(func() { close(cancelled) })
						return
					}
					inner.ServeHTTP(w, r)
				})
				srvA, srvB := httptest.NewServer(held), httptest.NewServer(b.handler())
				defer srvA.Close()
				defer srvB.Close()
				o := ledgerOptions("driver")
				coord := newCoord(t, coordEnv.DB, o)
				gid, err := beginTransfer(ctx, coordEnv.DB, coord, transferOf(srvA.URL, srvB.URL, saga.ModeTCC, 10, 500*time.Millisecond), false)
				if err != nil {
					t.Fatal(err)
				}
				rctx, stop := context.WithCancel(ctx)
				defer stop()
				go coord.Run(rctx)
				waitEnded(t, coordEnv.DB, 30*time.Second)
				<-cancelled
				time.Sleep(300 * time.Millisecond) // the late Try runs (or is refused)
				in, _ := saga.Get(ctx, coordEnv.DB, gid)
				err = checkLedger(ctx, coordEnv.DB, a, b, []transfer{{gid: gid, amount: 10, mode: saga.ModeTCC}}, nil)
				t.Logf("%s: %s; check: %v", gid, in.Reason, err)
				if in.Status != saga.Aborted {
					t.Fatalf("status %s, want aborted by the timeout", in.Status)
				}
				if noBarrier != (err != nil) {
					t.Fatalf("noBarrier=%v, ledger check: %v", noBarrier, err)
				}
			})
		}
	})
}
