package txn_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
	"github.com/sqlcoord/sqlcoord/txn"
)

// Every ordering of Try/Confirm/Cancel deliveries, duplicated and
// reordered, from concurrent goroutines: each account ends exactly as one
// logical TCC transaction would leave it.
func TestBarrierDeliveries(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		db := env.DB
		ph := db.Dialect().Placeholder
		dbtest.Exec(t, db, `CREATE TABLE accounts (gid VARCHAR(40) PRIMARY KEY, balance INT NOT NULL, frozen INT NOT NULL)`)
		b := txn.NewBarrier(db)
		upd := func(dBal, dFro int, gid string) func(context.Context, *sql.Tx) error {
			return func(ctx context.Context, tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, `UPDATE accounts SET balance = balance + `+ph(1)+`, frozen = frozen + `+ph(2)+` WHERE gid = `+ph(3), dBal, dFro, gid)
				return err
			}
		}
		const n = 60
		type plan struct {
			gid     string
			confirm bool
			ops     []txn.Op
		}
		var plans []plan
		for i := 0; i < n; i++ {
			p := plan{gid: fmt.Sprintf("g%d", i), confirm: i%2 == 0}
			dbtest.Exec(t, db, `INSERT INTO accounts VALUES (`+ph(1)+`, 100, 0)`, p.gid)
			if p.confirm {
				// the coordinator confirms only after a Try succeeded, but
				// duplicates of both may arrive late and concurrently
				p.ops = []txn.Op{txn.OpTry, txn.OpTry, txn.OpConfirm, txn.OpConfirm, txn.OpTry}
			} else {
				// Try may be lost, late, duplicated or never sent
				switch i % 3 {
				case 0:
					p.ops = []txn.Op{txn.OpCancel, txn.OpTry, txn.OpCancel, txn.OpTry}
				case 1:
					p.ops = []txn.Op{txn.OpTry, txn.OpCancel, txn.OpCancel, txn.OpTry}
				default:
					p.ops = []txn.Op{txn.OpCancel, txn.OpCancel}
				}
			}
			plans = append(plans, p)
		}
		var wg sync.WaitGroup
		errs := make(chan error, 1000)
		for _, p := range plans {
			if p.confirm {
				// Try first (as a coordinator would), then the rest concurrently
				if _, err := b.Try(ctx, p.gid, "b1", upd(-10, 10, p.gid)); err != nil {
					t.Fatal(err)
				}
			}
			ops := append([]txn.Op(nil), p.ops...)
			rand.Shuffle(len(ops), func(i, j int) { ops[i], ops[j] = ops[j], ops[i] })
			for _, op := range ops {
				wg.Add(1)
				go func() {
					defer wg.Done()
					var fn func(context.Context, *sql.Tx) error
					switch op {
					case txn.OpTry:
						fn = upd(-10, 10, p.gid)
					case txn.OpConfirm:
						fn = upd(0, -10, p.gid)
					case txn.OpCancel:
						fn = upd(10, -10, p.gid)
					}
					if _, err := b.Call(ctx, p.gid, "b1", op, fn); err != nil {
						errs <- err
					}
				}()
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		for _, p := range plans {
			var bal, fro int
			db.QueryRowContext(ctx, `SELECT balance, frozen FROM accounts WHERE gid = `+ph(1), p.gid).Scan(&bal, &fro)
			want := 100
			if p.confirm {
				want = 90
			}
			if bal != want || fro != 0 {
				t.Fatalf("%s (confirm=%v, ops %v): balance %d frozen %d, want %d/0", p.gid, p.confirm, p.ops, bal, fro, want)
			}
		}
		// a Try after its Cancel is refused, and says so
		if _, err := b.Cancel(ctx, "late", "b1", upd(10, -10, "late")); err != nil {
			t.Fatal(err)
		}
		ran, err := b.Try(ctx, "late", "b1", upd(-10, 10, "late"))
		if err != nil || ran {
			t.Fatalf("hanging Try: ran=%v err=%v", ran, err)
		}
		if _, err := b.Call(ctx, "", "b1", txn.OpTry, nil); err == nil {
			t.Fatal("empty gid accepted")
		}
		if _, err := b.Call(ctx, "g", "b1", txn.Op("prepare"), nil); err == nil {
			t.Fatal("unknown op accepted")
		}
		if n, err := b.Cleanup(ctx, 0, 50); err != nil || n == 0 {
			t.Fatalf("cleanup: %d %v", n, err)
		}
	})
}
