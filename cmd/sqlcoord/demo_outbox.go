package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/sqlcoord/sqlcoord/internal/core"
	"io"
	"net"
	"net/http"
	"os/exec"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sqlcoord/sqlcoord/outbox"
	"github.com/sqlcoord/sqlcoord/txn"
)

func init() {
	register(scenario{name: "outbox", title: "1,000 orders with their messages; the relay killed mid-way; a points consumer with an inbox", run: demoOutbox})
}

func demoOutbox(ctx context.Context, e *demoEnv) error {
	db := e.DB
	ph := db.Dialect().Placeholder
	for _, q := range []string{`DROP TABLE IF EXISTS demo_orders2`, `DROP TABLE IF EXISTS demo_points`} {
		db.ExecContext(ctx, q)
	}
	for _, q := range []string{`CREATE TABLE demo_orders2 (id INT PRIMARY KEY, user_id INT NOT NULL)`,
		`CREATE TABLE demo_points (order_id INT NOT NULL, points INT NOT NULL)`} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	defer db.ExecContext(context.Background(), `DROP TABLE demo_orders2`)
	defer db.ExecContext(context.Background(), `DROP TABLE demo_points`)
	if e.Self == "" {
		return errors.New("cannot find this executable")
	}
	// the points service: an HTTP consumer whose inbox makes redelivery harmless
	inbox, _ := outbox.NewInbox(db, fmt.Sprintf("demo-points-%d", time.Now().UnixNano()))
	var deliveries, duplicates atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		deliveries.Add(1)
		b, _ := io.ReadAll(r.Body)
		var m struct{ Order, Points int }
		if json.Unmarshal(b, &m) != nil {
			http.Error(w, "bad payload", http.StatusBadRequest)
			return
		}
		err := txn.Do(r.Context(), db, txn.Options{}, func(ctx context.Context, tx *sql.Tx) error {
			first, err := inbox.Receive(ctx, tx, r.Header.Get("Idempotency-Key"))
			if err != nil {
				return err
			}
			if !first {
				duplicates.Add(1)
				return nil
			}
			_, err = tx.ExecContext(ctx, `INSERT INTO demo_points VALUES (`+ph(1)+`, `+ph(2)+`)`, m.Order, m.Points)
			return err
		})
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
		}
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	url := "http://" + ln.Addr().String() + "/points"

	ob := outbox.New(db)
	for i := 1; i <= 1000; i++ {
		err := txn.Do(ctx, db, txn.Options{}, func(ctx context.Context, tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, `INSERT INTO demo_orders2 VALUES (`+ph(1)+`, `+ph(2)+`)`, i, 1000+i%10); err != nil {
				return err
			}
			m, err := outbox.JSON("orders.created", "", map[string]int{"order": i, "points": 10})
			if err != nil {
				return err
			}
			return ob.Enqueue(ctx, tx, m)
		})
		if err != nil {
			return err
		}
	}
	e.printf("1. 1,000 orders committed, each with its outbox message in the same transaction\n")
	relay := func() *exec.Cmd {
		c := demoChild(ctx, e.Self, core.ConnString(db), "relay", "--publisher", url, "--batch", "10")
		c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		c.Start()
		return c
	}
	r1 := relay()
	killAt := time.Now().Add(30 * time.Second)
	for deliveries.Load() < 300 && time.Now().Before(killAt) {
		time.Sleep(5 * time.Millisecond)
	}
	r1.Process.Signal(syscall.SIGKILL)
	r1.Wait()
	var granted int
	db.QueryRowContext(ctx, `SELECT count(*) FROM demo_points`).Scan(&granted)
	e.printf("2. relay pid %d killed with SIGKILL after %d deliveries (%d points granted so far)\n", r1.Process.Pid, deliveries.Load(), granted)
	r2 := relay()
	defer func() { r2.Process.Signal(syscall.SIGTERM); r2.Wait() }()
	deadline := time.Now().Add(60 * time.Second)
	var st outbox.Stats
	for time.Now().Before(deadline) {
		st, _ = ob.Stats(ctx)
		if st.Pending == 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	var grants, distinct int
	db.QueryRowContext(ctx, `SELECT count(*), count(DISTINCT order_id) FROM demo_points`).Scan(&grants, &distinct)
	e.printf("3. relay restarted; outbox: %d pending, %d published, %d dead\n", st.Pending, st.Published, st.Dead)
	e.printf("   %d HTTP deliveries (%d redelivered after the crash, absorbed by the inbox): %d point grants for %d orders\n",
		deliveries.Load(), duplicates.Load(), grants, distinct)
	return nil
}
