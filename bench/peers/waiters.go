package main

// Waiting at scale beside etcd: 1,000 waiters in 20 processes over 200
// queues — a third elections (Campaign), a third semaphores of one permit
// (Acquire), a third leases (AcquireWait) — each queue held by this
// process at first. While they wait: the server connections and open
// transactions they cost, the oldest snapshot (PostgreSQL) and whether
// VACUUM removes dead rows, InnoDB's history list purging (MariaDB), and
// statements a second per process. Then every queue is released at once
// and drains through its five waiters in turn: hand-off latency (the
// previous holder's release → the next holder's grant, both stamped by
// the processes themselves) and grants out of queue order (against the
// tickets' order, read from the database before the release; etcd: its
// keys' creation revisions). etcd runs the same with one client and one
// session per process, elections on every queue (it has no semaphore
// recipe; its lock is an election too).

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/coord"
	"github.com/sqlcoord/sqlcoord/metrics"
	"github.com/sqlcoord/sqlcoord/pgxv5"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/localdb"
)

const (
	scaleProcs  = 20
	scalePer    = 50
	scaleQueues = 200
	scaleHold   = 5 * time.Millisecond
	scaleTTL    = 10 * time.Second // the waiters' (and etcd's session) TTL
	holderTTL   = 60 * time.Second
)

// waiterMain is a waiter process: PER waiters of process PROC, each in
// queue (PROC*PER+j) mod QUEUES; it prints "GOT <queue> <id> <unix ns>"
// when granted and "REL <queue> <id> <unix ns>" right before releasing,
// and "DONE" when all its waiters had their turn.
func waiterMain() {
	ctx := context.Background()
	sys, addr := os.Getenv("SYSTEM"), os.Getenv("ADDR")
	proc, _ := strconv.Atoi(os.Getenv("PROC"))
	var out sync.Mutex
	say := func(f string, a ...any) {
		out.Lock()
		fmt.Printf(f+"\n", a...)
		out.Unlock()
	}
	var wg sync.WaitGroup
	switch sys {
	case "etcd":
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}, DialTimeout: 5 * time.Second})
		if err != nil {
			fail(err)
		}
		s, err := concurrency.NewSession(cli, concurrency.WithTTL(int(scaleTTL/time.Second)))
		if err != nil {
			fail(err)
		}
		for j := range scalePer {
			q := (proc*scalePer + j) % scaleQueues
			id := fmt.Sprintf("p%d-%d", proc, j)
			wg.Add(1)
			go func() {
				defer wg.Done()
				e := concurrency.NewElection(s, fmt.Sprintf("/scale-%d", q))
				if err := e.Campaign(ctx, id); err != nil {
					fail(err)
				}
				say("GOT %d %s %d", q, id, time.Now().UnixNano())
				time.Sleep(scaleHold)
				say("REL %d %s %d", q, id, time.Now().UnixNano())
				if err := e.Resign(ctx); err != nil {
					fail(err)
				}
			}()
		}
	default:
		o := sqlcoord.Options{MaxOpenConns: 4, MaxIdleConns: 4, Pooler: os.Getenv("POOLER") != ""}
		db, err := sqlcoord.Open(ctx, addr, o)
		if err != nil {
			fail(err)
		}
		var co coord.ClientOptions
		if l := os.Getenv("LISTEN_DSN"); l != "" {
			if co.Listener, err = pgxv5.NewDSNListener(l); err != nil {
				fail(err)
			}
		}
		c := coord.New(db, co)
		for j := range scalePer {
			q := (proc*scalePer + j) % scaleQueues
			id := fmt.Sprintf("p%d-%d", proc, j)
			name := fmt.Sprintf("scale-%d", q)
			wg.Add(1)
			go func() {
				defer wg.Done()
				var release func() error
				switch q % 3 {
				case 0:
					e, _ := c.Election(name, coord.ElectionOptions{ID: id, TTL: scaleTTL})
					l, err := e.Campaign(ctx, id)
					if err != nil {
						fail(err)
					}
					release = func() error { return l.Resign(ctx) }
				case 1:
					s, _ := c.Semaphore(name, 1)
					p, err := s.Acquire(ctx, id, scaleTTL)
					if err != nil {
						fail(err)
					}
					release = func() error { return s.Release(ctx, p) }
				default:
					l, err := c.AcquireWait(ctx, name, id, scaleTTL)
					if err != nil {
						fail(err)
					}
					release = func() error { return c.Release(ctx, l) }
				}
				say("GOT %d %s %d", q, id, time.Now().UnixNano())
				time.Sleep(scaleHold)
				say("REL %d %s %d", q, id, time.Now().UnixNano())
				if err := release(); err != nil {
					fail(err)
				}
			}()
		}
	}
	wg.Wait()
	say("DONE")
	time.Sleep(200 * time.Millisecond)
}

// scaleResult is one system's measurements.
type scaleResult struct {
	system               string
	connsPerProc         float64 // server connections per waiter process
	openTx               int     // sessions in a transaction, most seen at once
	horizon              string  // oldest xmin age / history list before → after
	vacuumLeft           string  // dead rows VACUUM left of 60,000
	stmtsPerProc         float64 // statements a second per waiter process while idle (-1: not measured)
	p50, p99, max        time.Duration
	handoffs, outOfOrder int
	note                 string
}

// renewCount counts the holder's renewals, which the idle statement count
// must not charge to the waiters.
type renewCount struct {
	metrics.Nop
	n atomic.Int64
}

func (r *renewCount) Call(op, _, _ string, _ time.Duration) {
	if op == "lease.renew" {
		r.n.Add(1)
	}
}

// waiterScale runs the comparison: PostgreSQL (direct, and through
// PgBouncer in transaction mode), MariaDB, and etcd.
func waiterScale(ctx context.Context, asked bool) string {
	want := func(name string) bool { return *only == "" || strings.Contains(","+*only+",", ","+name+",") }
	var rs []scaleResult
	if want("waiters") || want("waiters-pgbouncer") {
		pg, err := localdb.Start(ctx, "postgres")
		if err != nil {
			fail(err)
		}
		if want("waiters") {
			dsn, err := pg.CreateDatabase(ctx, "peers_waiters")
			if err != nil {
				fail(err)
			}
			rs = append(rs, sqlcoordScale(ctx, "sqlcoord, PostgreSQL", dsn, dsn, "", ""))
		}
		if want("waiters-pgbouncer") {
			dsn, err := pg.CreateDatabase(ctx, "peers_waiters_bouncer")
			if err != nil {
				fail(err)
			}
			b, err := localdb.StartPgBouncer(ctx, pg, 20)
			if err != nil {
				fail(err)
			}
			via := b.DSN("peers_waiters_bouncer")
			rs = append(rs, sqlcoordScale(ctx, "sqlcoord, PostgreSQL through PgBouncer (transaction mode), polling", dsn, via, "1", ""))
			rs = append(rs, sqlcoordScale(ctx, "sqlcoord, PostgreSQL through PgBouncer, listening on a direct connection", dsn, via, "1", dsn))
			b.Stop()
		}
		pg.Stop()
	}
	if want("waiters-mariadb") {
		my, err := localdb.Start(ctx, "mysql")
		if err != nil {
			fail(err)
		}
		dsn, err := my.CreateDatabase(ctx, "peers_waiters")
		if err != nil {
			fail(err)
		}
		rs = append(rs, sqlcoordScale(ctx, "sqlcoord, MariaDB", dsn, dsn, "", ""))
		my.Stop()
	}
	if want("waiters-etcd") || want("waiters") {
		addr, stop, err := startEtcd(ctx)
		if err != nil {
			if asked && want("waiters-etcd") {
				fail(err)
			}
			fmt.Fprintln(os.Stderr, "peers: etcd side of the waiter comparison skipped:", err)
		} else {
			rs = append(rs, etcdScale(ctx, addr))
			stop()
		}
	}
	return scaleTable(rs)
}

// scaleProcsStart starts the waiter processes.
func scaleProcsStart(env ...string) ([]*candidate, error) {
	var ps []*candidate
	for p := range scaleProcs {
		c, err := startRole("waiter", append(env, "PROC="+strconv.Itoa(p))...)
		if err != nil {
			return nil, err
		}
		ps = append(ps, c)
	}
	return ps, nil
}

// event is a GOT or REL line.
type event struct {
	queue int
	id    string
	at    time.Time
}

// collect reads every process's lines until each printed DONE.
func collect(ps []*candidate, timeout time.Duration) (gots, rels []event, err error) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	var first error
	for _, p := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			deadline := time.After(timeout)
			for {
				select {
				case l, ok := <-p.lines:
					if !ok {
						mu.Lock()
						first = fmt.Errorf("a waiter process exited before DONE")
						mu.Unlock()
						return
					}
					if l == "DONE" {
						return
					}
					f := strings.Fields(l)
					if len(f) != 4 {
						continue
					}
					q, _ := strconv.Atoi(f[1])
					ns, _ := strconv.ParseInt(f[3], 10, 64)
					e := event{q, f[2], time.Unix(0, ns)}
					mu.Lock()
					if f[0] == "GOT" {
						gots = append(gots, e)
					} else if f[0] == "REL" {
						rels = append(rels, e)
					}
					mu.Unlock()
				case <-deadline:
					mu.Lock()
					first = fmt.Errorf("waiters still waiting after %v", timeout)
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	return gots, rels, first
}

// handoffs computes, per queue in grant order, each grant's delay after
// the previous holder's release (released: the first holder's), and the
// grants out of the order given (order[queue] = ids, first to last).
func handoffs(gots, rels []event, released map[int]time.Time, order map[int][]string) (lat []time.Duration, outOfOrder int) {
	rel := map[string]time.Time{}
	for _, r := range rels {
		rel[r.id] = r.at
	}
	byQueue := map[int][]event{}
	for _, g := range gots {
		byQueue[g.queue] = append(byQueue[g.queue], g)
	}
	for q, gs := range byQueue {
		sort.Slice(gs, func(i, j int) bool { return gs[i].at.Before(gs[j].at) })
		prev := released[q]
		for _, g := range gs {
			if !prev.IsZero() {
				lat = append(lat, g.at.Sub(prev))
			}
			prev = rel[g.id]
		}
		pos := map[string]int{}
		for i, id := range order[q] {
			pos[id] = i
		}
		for i := range gs {
			for j := i + 1; j < len(gs); j++ {
				if pos[gs[i].id] > pos[gs[j].id] {
					outOfOrder++
				}
			}
		}
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return lat, outOfOrder
}

func pct(lat []time.Duration, p float64) time.Duration {
	if len(lat) == 0 {
		return 0
	}
	return lat[min(len(lat)-1, int(float64(len(lat))*p))]
}

// sqlcoordScale measures one sqlcoord system: direct is a DSN straight to
// the server (for the measurements), via what the waiters use.
func sqlcoordScale(ctx context.Context, system, direct, via, pooler, listen string) scaleResult {
	r := scaleResult{system: system, stmtsPerProc: -1}
	db := open(ctx, direct)
	defer db.Close()
	pg := db.Dialect().Family() == "postgres"
	count := func(q string) int {
		var n int
		if err := db.QueryRowContext(ctx, q).Scan(&n); err != nil {
			fail(fmt.Errorf("%s: %w", q, err))
		}
		return n
	}
	conns := `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()`
	openTx := `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()
  AND (state LIKE 'idle in transaction%' OR (state = 'active' AND xact_start < clock_timestamp() - interval '1 second'))`
	if !pg {
		conns = `SELECT count(*) FROM information_schema.PROCESSLIST WHERE DB = DATABASE()`
		// as on PostgreSQL: idle in a transaction, or in one for a second
		openTx = `SELECT count(*) FROM information_schema.INNODB_TRX t LEFT JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id
  WHERE t.trx_mysql_thread_id <> CONNECTION_ID() AND (p.COMMAND = 'Sleep' OR t.trx_started < NOW() - INTERVAL 1 SECOND)`
	}
	// the holder: every queue held, renewed by a keeper
	rc := &renewCount{}
	hdb, err := sqlcoord.Open(ctx, direct, sqlcoord.Options{Metrics: rc, MaxOpenConns: 8})
	if err != nil {
		fail(err)
	}
	defer hdb.Close()
	hc := coord.New(hdb)
	releases := make([]func() error, scaleQueues)
	for q := range scaleQueues {
		name := fmt.Sprintf("scale-%d", q)
		switch q % 3 {
		case 0:
			e, _ := hc.Election(name, coord.ElectionOptions{ID: "holder", TTL: holderTTL})
			l, err := e.Campaign(ctx, "holder")
			if err != nil {
				fail(err)
			}
			releases[q] = func() error { return l.Resign(ctx) }
		case 1:
			s, _ := hc.Semaphore(name, 1)
			p, err := s.TryAcquire(ctx, "holder", holderTTL)
			if err != nil {
				fail(err)
			}
			k, err := s.KeepAlive(ctx, p, coord.KeepAliveOptions{})
			if err != nil {
				fail(err)
			}
			releases[q] = func() error { return k.Release(ctx) }
		default:
			l, err := hc.Acquire(ctx, name, "holder", holderTTL)
			if err != nil {
				fail(err)
			}
			k, err := hc.KeepAlive(ctx, l, coord.KeepAliveOptions{})
			if err != nil {
				fail(err)
			}
			releases[q] = func() error { return k.Release(ctx) }
		}
	}
	time.Sleep(time.Second)
	base := count(conns)
	env := []string{"SYSTEM=sqlcoord", "ADDR=" + via}
	if pooler != "" {
		env = append(env, "POOLER=1")
	}
	if listen != "" {
		env = append(env, "LISTEN_DSN="+listen)
	}
	ps, err := scaleProcsStart(env...)
	if err != nil {
		fail(err)
	}
	defer func() {
		for _, p := range ps {
			p.kill()
		}
	}()
	for deadline := time.Now().Add(2 * time.Minute); count(`SELECT count(*) FROM coord_tickets`) < scaleProcs*scalePer; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			fail(fmt.Errorf("%s: the waiters did not all queue in 2 minutes", system))
		}
	}
	// settled: every waiter read its queues once; on PostgreSQL also every
	// backend's statistics of the queueing flushed (an idle backend
	// flushes its pending counters up to 10 s later), so the window
	// counts only idle waiting
	settle := 3 * time.Second
	if pg {
		settle = 12 * time.Second
	}
	time.Sleep(settle)
	// idle: statements, connections, open transactions, the horizon
	stmts := func() int64 {
		var n int64
		q := `SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()`
		if !pg {
			var name string
			if err := db.QueryRowContext(ctx, `SHOW GLOBAL STATUS LIKE 'Questions'`).Scan(&name, &n); err != nil {
				fail(err)
			}
			return n
		}
		if err := db.QueryRowContext(ctx, q).Scan(&n); err != nil {
			fail(err)
		}
		return n
	}
	if pg {
		db.ExecContext(ctx, `SELECT pg_stat_clear_snapshot()`)
	}
	const window = 10 * time.Second
	s0, r0, t0 := stmts(), rc.n.Load(), time.Now()
	own := 0 // this process's statements within the window
	maxConns, maxTx := 0, 0
	for time.Since(t0) < window {
		maxConns = max(maxConns, count(conns)-base)
		maxTx = max(maxTx, count(openTx))
		own += 2
		time.Sleep(time.Second)
	}
	if pg {
		time.Sleep(1100 * time.Millisecond) // backends flush their counters at most once a second
		own++
	}
	elapsed := time.Since(t0)
	s1, r1 := stmts(), rc.n.Load()
	waiterStmts := float64(s1-s0) - float64(r1-r0) - float64(own) - 2
	r.stmtsPerProc = waiterStmts / elapsed.Seconds() / scaleProcs
	r.connsPerProc = float64(maxConns) / scaleProcs
	r.openTx = maxTx
	if pg {
		var age sql.NullInt64
		db.QueryRowContext(ctx, `SELECT max(age(backend_xmin)) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&age)
		r.horizon = fmt.Sprintf("oldest xmin age %d", age.Int64)
		mustExec(ctx, db, `CREATE TABLE IF NOT EXISTS scale_vacuumed (id int PRIMARY KEY, v int NOT NULL)`)
		mustExec(ctx, db, `TRUNCATE scale_vacuumed`)
		mustExec(ctx, db, `INSERT INTO scale_vacuumed SELECT g, 0 FROM generate_series(1, 20000) g`)
		for range 3 {
			mustExec(ctx, db, `UPDATE scale_vacuumed SET v = v + 1`)
		}
		mustExec(ctx, db, `VACUUM scale_vacuumed`)
		r.vacuumLeft = fmt.Sprintf("%d of 60,000", count(`SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'scale_vacuumed'`))
	} else {
		hist := `SELECT count FROM information_schema.INNODB_METRICS WHERE name = 'trx_rseg_history_len'`
		mustExec(ctx, db, `CREATE TABLE IF NOT EXISTS scale_purged (id int PRIMARY KEY, v int NOT NULL)`)
		mustExec(ctx, db, `INSERT IGNORE INTO scale_purged VALUES (1, 0)`)
		for range 30 {
			mustExec(ctx, db, `UPDATE scale_purged SET v = v + 1 WHERE id = 1`)
		}
		before := count(hist)
		time.Sleep(6 * time.Second)
		r.horizon = fmt.Sprintf("history list %d → %d after 6 s", before, count(hist))
		r.vacuumLeft = "—"
	}
	// the tickets' order, then release everything at once
	order := map[int][]string{}
	rows, err := db.QueryContext(ctx, `SELECT queue, owner FROM coord_tickets ORDER BY seq`)
	if err != nil {
		fail(err)
	}
	for rows.Next() {
		var queue, owner string
		rows.Scan(&queue, &owner)
		i := strings.LastIndex(queue, "-")
		q, _ := strconv.Atoi(queue[i+1:])
		order[q] = append(order[q], owner)
	}
	rows.Close()
	released := map[int]time.Time{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for q := range scaleQueues {
		wg.Add(1)
		go func() {
			defer wg.Done()
			at := time.Now()
			if err := releases[q](); err != nil {
				fail(err)
			}
			mu.Lock()
			released[q] = at
			mu.Unlock()
		}()
	}
	wg.Wait()
	gots, rels, err := collect(ps, 3*time.Minute)
	if err != nil {
		fail(fmt.Errorf("%s: %w", system, err))
	}
	lat, ooo := handoffs(gots, rels, released, order)
	r.p50, r.p99, r.max, r.handoffs, r.outOfOrder = pct(lat, 0.5), pct(lat, 0.99), pct(lat, 1), len(lat), ooo
	for k, kind := range []string{"elections", "semaphores", "leases"} {
		var g, rl []event
		for _, e := range gots {
			if e.queue%3 == k {
				g = append(g, e)
			}
		}
		for _, e := range rels {
			if e.queue%3 == k {
				rl = append(rl, e)
			}
		}
		kl, _ := handoffs(g, rl, released, order)
		var first []time.Duration // the holder's releases → the first waiters' grants
		for _, e := range g {
			if at, ok := released[e.queue]; ok && e.id == order[e.queue][0] {
				first = append(first, e.at.Sub(at))
			}
		}
		sort.Slice(first, func(i, j int) bool { return first[i] < first[j] })
		fmt.Fprintf(os.Stderr, "%s, %s: hand-off p50 %v p99 %v (first from the holder: p50 %v)\n", system, kind, pct(kl, 0.5), pct(kl, 0.99), pct(first, 0.5))
	}
	return r
}

// etcdScale is the same on etcd: one client and one session per process.
func etcdScale(ctx context.Context, addr string) scaleResult {
	r := scaleResult{system: "etcd (one client and session per process)", stmtsPerProc: -1, horizon: "—", vacuumLeft: "—",
		note: "connections: one gRPC connection per process by construction"}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}, DialTimeout: 5 * time.Second})
	if err != nil {
		fail(err)
	}
	defer cli.Close()
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(int(holderTTL/time.Second)))
	if err != nil {
		fail(err)
	}
	defer s.Close()
	es := make([]*concurrency.Election, scaleQueues)
	for q := range scaleQueues {
		es[q] = concurrency.NewElection(s, fmt.Sprintf("/scale-%d", q))
		if err := es[q].Campaign(ctx, "holder"); err != nil {
			fail(err)
		}
	}
	ps, err := scaleProcsStart("SYSTEM=etcd", "ADDR="+addr)
	if err != nil {
		fail(err)
	}
	defer func() {
		for _, p := range ps {
			p.kill()
		}
	}()
	// queued: every election has its holder and five candidates' keys
	order := map[int][]string{}
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		n := 0
		for q := range scaleQueues {
			resp, err := cli.Get(ctx, fmt.Sprintf("/scale-%d/", q), clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
			if err != nil {
				fail(err)
			}
			var ids []string
			for _, kv := range resp.Kvs {
				if string(kv.Value) != "holder" {
					ids = append(ids, string(kv.Value))
				}
			}
			order[q] = ids
			n += len(ids)
		}
		if n == scaleProcs*scalePer {
			break
		}
		if time.Now().After(deadline) {
			fail(fmt.Errorf("etcd: %d of %d waiters queued after 2 minutes", n, scaleProcs*scalePer))
		}
	}
	r.connsPerProc = 1
	released := map[int]time.Time{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for q := range scaleQueues {
		wg.Add(1)
		go func() {
			defer wg.Done()
			at := time.Now()
			if err := es[q].Resign(ctx); err != nil {
				fail(err)
			}
			mu.Lock()
			released[q] = at
			mu.Unlock()
		}()
	}
	wg.Wait()
	gots, rels, err := collect(ps, 3*time.Minute)
	if err != nil {
		fail(fmt.Errorf("etcd: %w", err))
	}
	lat, ooo := handoffs(gots, rels, released, order)
	r.p50, r.p99, r.max, r.handoffs, r.outOfOrder = pct(lat, 0.5), pct(lat, 0.99), pct(lat, 1), len(lat), ooo
	return r
}

func mustExec(ctx context.Context, db *sqlcoord.DB, q string) {
	if _, err := db.ExecContext(ctx, q); err != nil {
		fail(fmt.Errorf("%s: %w", q, err))
	}
}

func scaleTable(rs []scaleResult) string {
	if len(rs) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n### %d waiters in %d processes over %d queues (a third each elections, semaphores of one permit, leases), then every queue released at once\n\n",
		scaleProcs*scalePer, scaleProcs, scaleQueues)
	b.WriteString("| system | server connections per process | open transactions | horizon while waiting | VACUUM left | statements/s per process, idle | hand-off p50 | p99 | max | grants out of queue order |\n|---|---|---|---|---|---|---|---|---|---|\n")
	ms := func(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }
	for _, r := range rs {
		st := "—"
		if r.stmtsPerProc >= 0 {
			st = fmt.Sprintf("%.1f", r.stmtsPerProc)
		}
		fmt.Fprintf(&b, "| %s | %.2f | %d | %s | %s | %s | %s | %s | %s | %d of %d |\n", r.system, r.connsPerProc, r.openTx, r.horizon, r.vacuumLeft, st,
			ms(r.p50), ms(r.p99), ms(r.max), r.outOfOrder, r.handoffs)
	}
	for _, r := range rs {
		if r.note != "" {
			fmt.Fprintf(&b, "\n%s: %s.\n", r.system, r.note)
		}
	}
	return b.String()
}
