package bench

import (
	"context"
	"database/sql"
	"errors"
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
//   - per transfer, one client: a business transaction (an order row),
//     then debit and credit called directly, against the same business
//     transaction with Begin and the transfer driven to its end inline
//     (claim, two calls, three fenced records) — the coordinator's cost
//     per global transaction;
//   - throughput with 1 and 3 drivers of 4 workers each, producers
//     beginning transfers faster than the drivers finish them, against
//     direct calls from as many clients as the drivers have workers:
//     transfers completed per second (counted in the database).
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
	order := fmt.Sprintf(`INSERT INTO bench_saga_orders (gid) VALUES (%s)`, db.Dialect().Placeholder(1))
	direct := func(ctx context.Context, _ int) error {
		gid, payload := next()
		if err := txn.Do(ctx, db, txn.Options{}, func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, order, gid)
			return err
		}); err != nil {
			return err
		}
		for i, u := range urls {
			if err := post(ctx, client, u, saga.Call{GID: gid, Branch: []string{"debit", "credit"}[i], Op: txn.OpAction, Payload: payload}); err != nil {
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
	begin := func(ctx context.Context) error {
		gid, payload := next()
		return txn.Do(ctx, db, txn.Options{}, func(ctx context.Context, tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, order, gid); err != nil {
				return err
			}
			_, err := coord.Begin(ctx, tx, saga.Global{GID: gid, Mode: saga.ModeSaga, Branches: []saga.Branch{
				{Name: "debit", Target: urls[0], Payload: payload}, {Name: "credit", Target: urls[1], Payload: payload}}})
			return err
		})
	}
	const directCase = "direct: order transaction, then debit + credit over HTTP (no coordinator)"
	db.SetMaxOpenConns(16)
	s.run(ctx, directCase, "", 1, direct)
	s.run(ctx, "saga: order transaction with Begin, then driven inline (claim, 2 calls, 3 records)", directCase, 1, func(ctx context.Context, _ int) error {
		if err := begin(ctx); err != nil {
			return err
		}
		n, err := coord.RunDue(ctx)
		if err == nil && n != 1 {
			err = fmt.Errorf("drove %d transfers, want 1", n)
		}
		return err
	})
	for _, drivers := range []int{1, 3} {
		workers := drivers * opts.Workers
		db.SetMaxOpenConns(2*workers + 8)
		s.run(ctx, directCase, "", workers, direct)
		r, err := sagaThroughput(ctx, db, opts, drivers, cfg.Duration, begin)
		if err != nil {
			return s.out, err
		}
		r.Dialect, r.Group, r.Case, r.Baseline = db.Dialect().Name(), s.group, fmt.Sprintf("saga: transfers completed/s by %d driver(s) × %d workers", drivers, opts.Workers), directCase
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

// sagaThroughput runs drivers while producers keep a backlog, and counts
// the transfers that succeeded during d.
func sagaThroughput(ctx context.Context, db *sqlcoord.DB, opts saga.Options, drivers int, d time.Duration, begin func(context.Context) error) (Result, error) {
	count := func() (int64, error) {
		c, err := saga.Counts(ctx, db)
		return c[string(saga.Succeeded)], err
	}
	live := func() (int64, error) {
		c, err := saga.Counts(ctx, db)
		return c[string(saga.Running)], err
	}
	// A backlog first, so that the drivers never wait for producers.
	for i := 0; i < 200*drivers; i++ {
		if err := begin(ctx); err != nil {
			return Result{}, err
		}
	}
	pctx, stopProducers := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for p := 0; p < 2; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for pctx.Err() == nil {
				if n, _ := live(); n > int64(400*drivers) {
					time.Sleep(5 * time.Millisecond)
					continue
				}
				begin(pctx)
			}
		}()
	}
	dctx, stopDrivers := context.WithCancel(ctx)
	var errMu sync.Mutex
	var runErr error
	for i := 0; i < drivers; i++ {
		o := opts
		o.Owner = fmt.Sprintf("bench-%d", i)
		c, err := saga.New(db, o)
		if err != nil {
			stopDrivers()
			stopProducers()
			return Result{}, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.Run(dctx); err != nil {
				errMu.Lock()
				runErr = err
				errMu.Unlock()
			}
		}()
	}
	time.Sleep(500 * time.Millisecond) // warm up
	n0, err := count()
	start := time.Now()
	time.Sleep(d)
	n1, err1 := count()
	el := time.Since(start)
	stopDrivers()
	stopProducers()
	wg.Wait()
	if err = errors.Join(err, err1, runErr); err != nil {
		return Result{}, err
	}
	// Leave nothing live for the next case.
	if _, err := saga.Cleanup(ctx, db, 0, 10000); err != nil {
		return Result{}, err
	}
	if _, err := db.ExecContext(ctx, `DELETE FROM coord_gtx_branches`); err != nil {
		return Result{}, err
	}
	if _, err := db.ExecContext(ctx, `DELETE FROM coord_gtx`); err != nil {
		return Result{}, err
	}
	return Result{Clients: drivers * opts.Workers, Ops: n1 - n0, Elapsed: el, OpsPerS: float64(n1-n0) / el.Seconds()}, nil
}

// post is one participant call made directly, as a driver makes it.
func post(ctx context.Context, client *http.Client, url string, c saga.Call) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(string(c.Payload)))
	if err != nil {
		return err
	}
	req.Header.Set(saga.HeaderGID, c.GID)
	req.Header.Set(saga.HeaderBranch, c.Branch)
	req.Header.Set(saga.HeaderOp, string(c.Op))
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: HTTP %d", url, resp.StatusCode)
	}
	return nil
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
