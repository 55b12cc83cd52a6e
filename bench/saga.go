package bench

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/saga"
	"github.com/sqlcoord/sqlcoord/txn"
)

// sagaAccounts spreads transfers over this many accounts per bank, so
// that the benchmark measures the coordinator, not one hot row.
const sagaAccounts = 1000

// Saga measures a money transfer between two participants reached over
// HTTP (loopback; each participant applies its effect with txn.Barrier in
// this database) beside the same two calls made without a coordinator:
//
//   - with 1, 4 and 12 clients: a business transaction (an order row),
//     then debit and credit called directly, against the same business
//     transaction with Start and the transfer driven to its end by
//     Started.Drive (two calls, two durable fenced records; with 1 client
//     also Begin then Drive, which adds a claim) — the coordinator's cost
//     per global transaction;
//   - throughput with 1 and 3 drivers (Run) of 4 workers each, driving a
//     backlog begun beforehand, against direct calls from as many
//     clients as the drivers have workers: transfers completed per
//     second, counted in the database.
func Saga(ctx context.Context, db *sqlcoord.DB, cfg Config) (_ []Result, retErr error) {
	cfg.defaults()
	s := &suite{db: db, cfg: cfg, group: "saga"}
	cleanup, err := sagaTables(ctx, db)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	urls, stop, err := sagaParticipants(db)
	if err != nil {
		return nil, err
	}
	defer stop()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	var seq atomic.Int64
	run := fmt.Sprintf("%d", time.Now().UnixNano())
	next := func() (string, []byte) {
		n := seq.Add(1)
		return run + "-" + strconv.FormatInt(n, 10), []byte(strconv.FormatInt(n%sagaAccounts, 10) + ":1")
	}
	orderInsert := fmt.Sprintf(`INSERT INTO bench_saga_orders (gid) VALUES (%s)`, db.Dialect().Placeholder(1))
	direct := func(ctx context.Context, _ int) error {
		gid, payload := next()
		if err := txn.Do(ctx, db, txn.Options{}, func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, orderInsert, gid)
			return err
		}); err != nil {
			return err
		}
		for i, u := range urls {
			if err := saga.Invoke(ctx, client, u, saga.Call{GID: gid, Branch: []string{"debit", "credit"}[i], Op: txn.OpAction, Payload: payload}); err != nil {
				return err
			}
		}
		return nil
	}
	opts := saga.Options{Owner: "bench", Poll: 5 * time.Millisecond, Workers: 4, HTTPClient: client}
	coord, err := saga.New(db, opts)
	if err != nil {
		return nil, err
	}
	// order is the order transaction with a transfer recorded in it by
	// with (Begin or Start).
	order := func(ctx context.Context, with func(ctx context.Context, tx *sql.Tx, g saga.Global) error) (string, error) {
		gid, payload := next()
		return gid, txn.Do(ctx, db, txn.Options{}, func(ctx context.Context, tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, orderInsert, gid); err != nil {
				return err
			}
			return with(ctx, tx, saga.Global{GID: gid, Mode: saga.ModeSaga, Branches: []saga.Branch{
				{Name: "debit", Target: urls[0], Payload: payload}, {Name: "credit", Target: urls[1], Payload: payload}}})
		})
	}
	begin := func(ctx context.Context) (string, error) {
		return order(ctx, func(ctx context.Context, tx *sql.Tx, g saga.Global) error {
			_, err := coord.Begin(ctx, tx, g)
			return err
		})
	}
	succeeded := func(gid string, st saga.Status, err error) error {
		if err == nil && st != saga.Succeeded {
			err = fmt.Errorf("%s: %s", gid, st)
		}
		return err
	}
	const directCase = "direct: order transaction, then debit + credit over HTTP (no coordinator)"
	viaDrive := func(ctx context.Context, _ int) error {
		gid, err := begin(ctx)
		if err != nil {
			return err
		}
		st, err := coord.Drive(ctx, gid)
		return succeeded(gid, st, err)
	}
	viaStart := func(ctx context.Context, _ int) error {
		var started *saga.Started[*sql.Tx]
		gid, err := order(ctx, func(ctx context.Context, tx *sql.Tx, g saga.Global) error {
			var err error
			started, err = coord.Start(ctx, tx, g)
			return err
		})
		if err != nil {
			return err
		}
		st, err := started.Drive(ctx)
		return succeeded(gid, st, err)
	}
	for _, n := range []int{1, 4, 12} {
		poolSize(db, 2*n+8)
		s.run(ctx, directCase, "", n, direct)
		if n == 1 {
			s.run(ctx, "saga: order transaction with Begin, then Drive (a claim, 2 calls, 2 records)", directCase, n, viaDrive)
		}
		s.run(ctx, "saga: order transaction with Start, then Started.Drive (2 calls, 2 records)", directCase, n, viaStart)
	}
	for _, drivers := range []int{1, 3} {
		workers := drivers * opts.Workers
		poolSize(db, 2*workers+8)
		r, err := sagaDrain(ctx, db, opts, drivers, cfg.Duration, begin)
		if err != nil {
			return s.out, err
		}
		r.Dialect, r.Group, r.Case, r.Baseline = db.Dialect().Name(), s.group,
			fmt.Sprintf("saga: backlog driven by %d driver(s) × %d workers (Begin not timed)", drivers, opts.Workers), directCase
		for _, b := range s.out {
			if b.Case == directCase && b.Clients == workers && b.OpsPerS > 0 {
				r.Ratio = r.OpsPerS / b.OpsPerS
			}
		}
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, "  %-8s %-50s %9.0f transfers/s (%.2f× direct)\n", r.Dialect, r.Case, r.OpsPerS, r.Ratio)
		}
		s.out = append(s.out, r)
	}
	return s.out, nil
}

// sagaDrain begins a backlog of transfers (untimed, eight producers),
// then times drivers driving all of it, and counts them in the database.
func sagaDrain(ctx context.Context, db *sqlcoord.DB, opts saga.Options, drivers int, d time.Duration, begin func(context.Context) (string, error)) (Result, error) {
	// Start from empty tables, with enough for d at 1,000 transfers/s per
	// driver.
	for _, q := range []string{`DELETE FROM coord_gtx_branches`, `DELETE FROM coord_gtx`} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return Result{}, err
		}
	}
	n := int64(d.Seconds()*1000) * int64(drivers)
	var made atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, 8)
	for p := 0; p < 8; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for made.Add(1) <= n {
				if _, err := begin(ctx); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		return Result{}, err
	}
	dctx, stop := context.WithCancel(ctx)
	defer stop()
	var runErr error
	var mu sync.Mutex
	start := time.Now()
	for i := 0; i < drivers; i++ {
		o := opts
		o.Owner = fmt.Sprintf("bench-%d", i)
		c, err := saga.New(db, o)
		if err != nil {
			return Result{}, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.Run(dctx); err != nil {
				mu.Lock()
				runErr = err
				mu.Unlock()
			}
		}()
	}
	var done int64
	for {
		c, err := saga.Counts(ctx, db)
		if err != nil {
			return Result{}, err
		}
		if done = c[string(saga.Succeeded)]; done >= n || c[string(saga.Running)] == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond) // a count scans the table: seldom
	}
	el := time.Since(start)
	stop()
	wg.Wait()
	if runErr != nil {
		return Result{}, runErr
	}
	// Leave nothing for the next case.
	for _, q := range []string{`DELETE FROM coord_gtx_branches`, `DELETE FROM coord_gtx`} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return Result{}, err
		}
	}
	return Result{Clients: drivers * opts.Workers, Ops: done, Elapsed: el, OpsPerS: float64(done) / el.Seconds()}, nil
}

// sagaTables creates the orders and the two banks' accounts.
func sagaTables(ctx context.Context, db *sqlcoord.DB) (func(), error) {
	drop := func() {
		for _, t := range []string{"bench_saga_orders", "bench_bank_a", "bench_bank_b"} {
			db.ExecContext(context.Background(), `DROP TABLE IF EXISTS `+t)
		}
	}
	drop()
	stmts := []string{`CREATE TABLE bench_saga_orders (gid VARCHAR(64) PRIMARY KEY)`}
	for _, t := range []string{"bench_bank_a", "bench_bank_b"} {
		stmts = append(stmts, `CREATE TABLE `+t+` (id INT PRIMARY KEY, balance BIGINT NOT NULL)`)
		var vals []string
		for i := 0; i < sagaAccounts; i++ {
			vals = append(vals, fmt.Sprintf("(%d, 1000000)", i))
		}
		stmts = append(stmts, `INSERT INTO `+t+` (id, balance) VALUES `+strings.Join(vals, ", "))
	}
	for _, q := range stmts {
		if _, err := db.ExecContext(ctx, q); err != nil {
			drop()
			return nil, err
		}
	}
	return drop, nil
}

// sagaParticipants serves the debit and credit participants on loopback:
// each applies its effect and its barrier row in one transaction.
func sagaParticipants(db *sqlcoord.DB) ([]string, func(), error) {
	b := txn.NewBarrier(db)
	ph := db.Dialect().Placeholder
	var urls []string
	var servers []*http.Server
	for i, table := range []string{"bench_bank_a", "bench_bank_b"} {
		sign := []int64{-1, 1}[i]
		q := `UPDATE ` + table + ` SET balance = balance + ` + ph(1) + ` WHERE id = ` + ph(2)
		h := saga.Handler(b, func(ctx context.Context, tx *sql.Tx, c saga.Call) error {
			acct, amount, ok := strings.Cut(string(c.Payload), ":")
			x, err := strconv.ParseInt(amount, 10, 64)
			if !ok || err != nil {
				return saga.Fail(fmt.Errorf("bad payload %q", c.Payload))
			}
			if c.Op == txn.OpCompensate {
				x = -x
			}
			_, err = tx.ExecContext(ctx, q, sign*x, acct)
			return err
		})
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, nil, err
		}
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
		go srv.Serve(ln)
		servers = append(servers, srv)
		urls = append(urls, "http://"+ln.Addr().String()+"/"+table)
	}
	return urls, func() {
		for _, s := range servers {
			s.Close()
		}
	}, nil
}
