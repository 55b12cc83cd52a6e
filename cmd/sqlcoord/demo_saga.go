package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"github.com/sqlcoord/sqlcoord/internal/core"
	"math/rand/v2"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/saga"
	"github.com/sqlcoord/sqlcoord/txn"
)

func init() {
	register(scenario{name: "saga", title: "money moved between two services by a saga, with failing services and a killed driver", run: demoSaga})
}

// demoBanks are two participant services over HTTP on loopback, each
// with its accounts table in the demo database; they fail some calls
// before doing anything and lose the answer of others after doing them.
type demoBanks struct {
	db         *sqlcoord.DB
	urls       [2]string
	flaky      atomic.Bool
	calls, bad atomic.Int64
	stop       func()
}

func startBanks(ctx context.Context, db *sqlcoord.DB, barrier bool) (*demoBanks, error) {
	ph := db.Dialect().Placeholder
	for _, t := range []string{"demo_bank_a", "demo_bank_b"} {
		db.ExecContext(ctx, `DROP TABLE IF EXISTS `+t)
		if _, err := db.ExecContext(ctx, `CREATE TABLE `+t+` (id INT PRIMARY KEY, balance BIGINT NOT NULL)`); err != nil {
			return nil, err
		}
		if _, err := db.ExecContext(ctx, `INSERT INTO `+t+` VALUES (1, 1000)`); err != nil {
			return nil, err
		}
	}
	b := &demoBanks{db: db}
	var servers []*http.Server
	for i, t := range []string{"demo_bank_a", "demo_bank_b"} {
		sign := []int64{-1, 1}[i]
		apply := func(ctx context.Context, tx *sql.Tx, c saga.Call) error {
			x, _ := strconv.ParseInt(string(c.Payload), 10, 64)
			if c.Op == txn.OpCompensate {
				x = -x
			}
			q := `UPDATE ` + t + ` SET balance = balance + ` + ph(1) + ` WHERE id = 1 AND balance + ` + ph(2) + ` >= 0`
			res, err := tx.ExecContext(ctx, q, sign*x, sign*x)
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n != 1 {
				return saga.Fail(errors.New("insufficient funds"))
			}
			return nil
		}
		var inner http.Handler = saga.Handler(txn.NewBarrier(db), apply)
		if !barrier {
			inner = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				c, _ := saga.Request(r)
				if err := txn.Do(r.Context(), db, txn.Options{}, func(ctx context.Context, tx *sql.Tx) error { return apply(ctx, tx, c) }); err != nil {
					http.Error(w, err.Error(), http.StatusInternalServerError)
				}
			})
		}
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b.calls.Add(1)
			roll := rand.IntN(10)
			if b.flaky.Load() && roll < 2 {
				b.bad.Add(1)
				http.Error(w, "service unavailable", http.StatusServiceUnavailable)
				return
			}
			if b.flaky.Load() && roll < 3 {
				b.bad.Add(1)
				inner.ServeHTTP(discard{}, r) // done, but the answer is lost
				http.Error(w, "gateway timeout", http.StatusGatewayTimeout)
				return
			}
			inner.ServeHTTP(w, r)
		})
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
		go srv.Serve(ln)
		servers = append(servers, srv)
		b.urls[i] = "http://" + ln.Addr().String() + "/" + t
	}
	b.stop = func() {
		for _, s := range servers {
			s.Close()
		}
		for _, t := range []string{"demo_bank_a", "demo_bank_b"} {
			db.ExecContext(context.Background(), `DROP TABLE IF EXISTS `+t)
		}
	}
	return b, nil
}

// balances returns bank a's, bank b's and their sum.
func (b *demoBanks) balances(ctx context.Context) (int64, int64, int64) {
	var x, y int64
	b.db.QueryRowContext(ctx, `SELECT balance FROM demo_bank_a WHERE id = 1`).Scan(&x)
	b.db.QueryRowContext(ctx, `SELECT balance FROM demo_bank_b WHERE id = 1`).Scan(&y)
	return x, y, x + y
}

// discard is a ResponseWriter that drops the answer.
type discard struct{}

func (discard) Header() http.Header         { return http.Header{} }
func (discard) Write(b []byte) (int, error) { return len(b), nil }
func (discard) WriteHeader(int)             {}

func demoSaga(ctx context.Context, e *demoEnv) error {
	db := e.DB
	if e.Self == "" {
		return errors.New("cannot find this executable")
	}
	transfer := func(b *demoBanks, amount int) saga.Global {
		p := []byte(strconv.Itoa(amount))
		return saga.Global{Mode: saga.ModeSaga, Branches: []saga.Branch{
			{Name: "debit", Target: b.urls[0], Payload: p}, {Name: "credit", Target: b.urls[1], Payload: p}}}
	}

	e.printf("1. Without a coordinator: the client calls debit, then credit, and retries what fails (services fail 30%% of calls):\n")
	b, err := startBanks(ctx, db, false)
	if err != nil {
		return err
	}
	b.flaky.Store(true)
	client := &http.Client{Timeout: 2 * time.Second}
	call := func(url, gid, branch string, amount int) error {
		return saga.Invoke(ctx, client, url, saga.Call{GID: gid, Branch: branch, Op: txn.OpAction, Payload: []byte(strconv.Itoa(amount))})
	}
	for i := 0; i < 20; i++ {
		gid := fmt.Sprintf("naive-%d", i)
		for try := 0; try < 5 && call(b.urls[0], gid, "debit", 10) != nil; try++ {
		}
		for try := 0; try < 5 && call(b.urls[1], gid, "credit", 10) != nil; try++ {
		}
	}
	x, y, sum := b.balances(ctx)
	e.printf("   20 transfers of 10: bank a %d, bank b %d, total %d (was 2000): a retry after a lost answer moves money twice,\n   a debit whose credit keeps failing is never undone\n\n", x, y, sum)
	b.stop()

	e.printf("2. A saga per transfer, begun in the order's transaction; two `sqlcoord saga run` driver processes,\n   one SIGKILLed mid-way; participants with txn.Barrier; the same failing services; 3 transfers too large:\n")
	if b, err = startBanks(ctx, db, true); err != nil {
		return err
	}
	defer b.stop()
	b.flaky.Store(true)
	c, err := saga.New(db, saga.Options{})
	if err != nil {
		return err
	}
	var gids []string
	for i := 0; i < 20; i++ {
		amount := 10
		if i%7 == 3 {
			amount = 5000 // more than bank a holds: refused, compensated
		}
		var gid string
		err := txn.Do(ctx, db, txn.Options{}, func(ctx context.Context, tx *sql.Tx) error {
			var err error
			gid, err = c.Begin(ctx, tx, transfer(b, amount))
			return err
		})
		if err != nil {
			return err
		}
		gids = append(gids, gid)
	}
	driver := func() *exec.Cmd {
		cmd := demoChild(ctx, e.Self, core.ConnString(db), "saga", "run", "--lease", "2s", "--call-timeout", "1s", "--workers", "2")
		cmd.Start()
		return cmd
	}
	d1, d2 := driver(), driver()
	time.Sleep(300 * time.Millisecond)
	d1.Process.Signal(syscall.SIGKILL)
	d1.Wait()
	e.printf("   driver 1 SIGKILLed after 300 ms; driver 2 takes over what it held once its 2 s lease ends\n")
	deadline := time.Now().Add(60 * time.Second)
	var counts map[string]int64
	for time.Now().Before(deadline) {
		if counts, err = saga.Counts(ctx, db); err != nil {
			return err
		}
		if counts["running"]+counts["compensating"]+counts["stuck"] == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	d2.Process.Signal(syscall.SIGTERM)
	d2.Wait()
	x, y, sum = b.balances(ctx)
	e.printf("   %d succeeded, %d aborted (compensated), %d still live; %d service calls, %d failed or lost their answer\n",
		counts["succeeded"], counts["aborted"], counts["running"]+counts["compensating"], b.calls.Load(), b.bad.Load())
	e.printf("   bank a %d, bank b %d, total %d (was 2000): every transfer moved its amount on both sides or on neither\n", x, y, sum)
	if in, err := saga.Get(ctx, db, gids[3]); err == nil {
		e.printf("   e.g. %s: %s — %s\n", in.GID, in.Status, in.Reason)
	}
	e.printf("   `sqlcoord saga list --filter all` and the console's Sagas page show them; `saga show GID` a transaction's branches.\n")
	if sum != 2000 {
		return fmt.Errorf("the ledger does not balance: total %d", sum)
	}
	return nil
}
