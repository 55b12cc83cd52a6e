// Command soak runs sqlcoord's primitives together for a long time against
// throwaway PostgreSQL and MariaDB servers, with faults, and checks that
// nothing is lost or doubled and that no resource grows without bound
// (`make soak`; not part of `make test`).
//
// Per dialect: producers enqueue an outbox message with each business row
// (one transaction); three relay processes publish them into a consumer
// table whose unique key absorbs redeliveries (on PostgreSQL two streaming
// relay processes of one group publish beside them from the WAL, and the
// WAL their slot retains is a judged series); two scheduler processes run
// a sharded job every second whose effect is fenced and completed in one
// transaction; three workers take turns on a lease kept alive, writing
// fenced rows; workers update one session's counter and churn short
// sessions; the tables' cleanups run every 10 s. Relays and schedulers are
// SIGKILLed and SIGSTOPped at random, and the database server restarts
// every -restart-every. Every 10 s it records throughput, p99, goroutines,
// heap, connections, table and index sizes, dead tuples and autovacuum runs
// (PostgreSQL) or the history list length (MariaDB); at the end it writes
// soak.md, soak.json and soak.png to -out.
package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/bench"
	"github.com/sqlcoord/sqlcoord/coord"
	"github.com/sqlcoord/sqlcoord/coord/jobs"
	"github.com/sqlcoord/sqlcoord/internal/backoff"
	"github.com/sqlcoord/sqlcoord/migrate"
	"github.com/sqlcoord/sqlcoord/outbox"
	"github.com/sqlcoord/sqlcoord/outbox/pgstream"
	"github.com/sqlcoord/sqlcoord/partitions"
	"github.com/sqlcoord/sqlcoord/session"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/localdb"
	"github.com/sqlcoord/sqlcoord/txn"
)

func main() {
	role := flag.String("role", "", "internal: relay or scheduler (a child process)")
	dur := flag.Duration("duration", 30*time.Minute, "how long the load runs (then the relays drain and the invariants are checked)")
	dialects := flag.String("dialects", "postgres,mysql", "servers to soak, side by side")
	restartEvery := flag.Duration("restart-every", 10*time.Minute, "restart the database server this often (0: never)")
	killEvery := flag.Duration("kill-every", 20*time.Second, "SIGKILL a relay or scheduler process this often (0: never)")
	stopEvery := flag.Duration("stop-every", 45*time.Second, "SIGSTOP a relay or scheduler process for 2–6 s this often (0: never)")
	rate := flag.Int("rate", 100, "orders (outbox messages) per second per dialect")
	sample := flag.Duration("sample", 10*time.Second, "how often the series are recorded")
	cleanupDuty := flag.Float64("cleanup-duty", 0.25, "sqlcoord.Options.CleanupDuty of the cleanups the soak runs every 10 s (0: unpaced)")
	keyPeriod := flag.Duration("key-period", 0, "partition the idempotency keys (partitions.EnableKeys) with this period and roll them every 10 s instead of their row-by-row cleanup (0: a plain table)")
	partSize := flag.Int64("partition-size", 0, "partition the outbox (partitions.Enable) with this many ids a partition and roll it every 10 s instead of its row-by-row cleanup (0: a plain outbox)")
	out := flag.String("out", "bench/out", "folder for soak.md, soak.json and soak.png")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *role != "" {
		if err := child(ctx, *role); err != nil && ctx.Err() == nil {
			fmt.Fprintln(os.Stderr, "soak child:", err)
			os.Exit(1)
		}
		return
	}
	cfg := config{dur: *dur, restartEvery: *restartEvery, killEvery: *killEvery, stopEvery: *stopEvery, rate: *rate, sample: *sample, cleanupDuty: *cleanupDuty, partSize: *partSize, keyPeriod: *keyPeriod}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var reports []*report
	for _, d := range strings.Split(*dialects, ",") {
		d = strings.TrimSpace(d)
		if d != "postgres" && d != "mysql" {
			fmt.Fprintf(os.Stderr, "soak: -dialects: unknown %q (postgres, mysql)\n", d)
			os.Exit(2)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := soak(ctx, d, cfg)
			mu.Lock()
			reports = append(reports, r)
			mu.Unlock()
		}()
	}
	wg.Wait()
	sort.Slice(reports, func(i, j int) bool { return reports[i].Dialect > reports[j].Dialect })
	ok, err := write(*out, cfg, reports)
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
	if !ok {
		os.Exit(1)
	}
}

type config struct {
	dur, restartEvery, killEvery, stopEvery, sample time.Duration
	rate                                            int
	cleanupDuty                                     float64       // sqlcoord.Options.CleanupDuty of the soak's own pool
	partSize                                        int64         // ids per outbox partition (0: not partitioned)
	keyPeriod                                       time.Duration // period of a key partition (0: not partitioned)
}

// sample is one 10-second record of one dialect's run.
type sample struct {
	At              float64            `json:"at_s"`
	OrdersPerS      float64            `json:"orders_per_s"`
	DeliveredPerS   float64            `json:"delivered_per_s"`
	EnqueueP50ms    float64            `json:"enqueue_p50_ms"`
	EnqueueP99ms    float64            `json:"enqueue_p99_ms"`
	Goroutines      int                `json:"goroutines"`       // this process's share (producers, leases, sessions)
	HeapMB          float64            `json:"heap_mb"`          // this process
	ChildGoroutines int                `json:"child_goroutines"` // relays and schedulers, summed
	ChildHeapMB     float64            `json:"child_heap_mb"`
	PoolConns       int                `json:"pool_conns"`
	ServerConns     int                `json:"server_conns"`
	TableMB         map[string]float64 `json:"table_mb"` // data + indexes
	DeadTuples      int64              `json:"dead_tuples,omitempty"`
	Autovacuums     int64              `json:"autovacuums,omitempty"`
	HistoryLength   int64              `json:"history_list_length,omitempty"`
	OldestXminAge   int64              `json:"oldest_xmin_age,omitempty"`  // PostgreSQL: transactions since the oldest snapshot of the database's sessions
	PurgeLag        int64              `json:"purge_lag_trx,omitempty"`    // MariaDB: transactions not yet purged (Trx id counter − purge done)
	SlotMB          float64            `json:"slot_retained_mb,omitempty"` // PostgreSQL: WAL the streaming relays' slot retains
	LogPerOrder     float64            `json:"log_bytes_per_order"`        // WAL (PostgreSQL) or redo (InnoDB's LSN) written per order in the window, everything included
	RelayLagS       float64            `json:"relay_lag_s"`                // age of the oldest message not yet published
	Errors          int64              `json:"errors"`                     // producer errors in the window (a restart's)
	ServerDown      bool               `json:"server_down"`                // the server did not answer: its series repeat the last sample
}

type report struct {
	Dialect    string            `json:"dialect"`
	Settings   string            `json:"settings"`
	Samples    []sample          `json:"samples"`
	Events     []string          `json:"events"`
	Invariants map[string]string `json:"invariants"` // name → result ("ok" or what failed)
	Growth     map[string]string `json:"growth"`     // series → verdict
	Failed     bool              `json:"failed"`
	Err        string            `json:"error,omitempty"`
}

var tables = []string{"coord_outbox", "coord_idempotency", "coord_job_runs", "coord_job_slots", "coord_sessions", "coord_leases", "coord_fences"}

const job = "soak-sharded"

// soak runs one dialect's whole soak and returns its report.
func soak(ctx context.Context, family string, cfg config) *report {
	rep := &report{Dialect: family, Invariants: map[string]string{}, Growth: map[string]string{}}
	say := func(f string, a ...any) {
		line := fmt.Sprintf("%s %-8s ", time.Now().UTC().Format("15:04:05"), family) + fmt.Sprintf(f, a...)
		fmt.Println(line)
	}
	fail := func(err error) *report {
		rep.Err, rep.Failed = err.Error(), true
		say("error: %v", err)
		return rep
	}
	srv, err := localdb.Start(ctx, family)
	if err != nil {
		return fail(err)
	}
	defer srv.Stop()
	dsn, err := srv.CreateDatabase(ctx, "soak")
	if err != nil {
		return fail(err)
	}
	db, err := sqlcoord.Open(ctx, dsn, sqlcoord.Options{MaxOpenConns: 40, MaxIdleConns: 40, CleanupDuty: cfg.cleanupDuty})
	if err != nil {
		return fail(err)
	}
	defer db.Close()
	rep.Dialect = db.Dialect().Name()
	if err := migrate.Migrate(ctx, db, migrate.Up); err != nil {
		return fail(err)
	}
	if err := createTables(ctx, db); err != nil {
		return fail(err)
	}
	if cfg.partSize > 0 {
		if err := partitions.Enable(ctx, db, partitions.Options{Size: cfg.partSize}); err != nil {
			return fail(err)
		}
		say("outbox partitioned, %d ids a partition", cfg.partSize)
	}
	if cfg.keyPeriod > 0 {
		if err := partitions.EnableKeys(ctx, db, partitions.KeysOptions{Period: cfg.keyPeriod}); err != nil {
			return fail(err)
		}
		say("idempotency keys partitioned, a partition per %v", cfg.keyPeriod)
	}
	rep.Settings = bench.ServerSettings(ctx, db)
	s := &soakRun{db: db, cfg: cfg, rep: rep, say: say, dsn: dsn, children: map[int]*childProc{}}
	runCtx, stopLoad := context.WithTimeout(ctx, cfg.dur)
	defer stopLoad()
	// children: three polling relays, two schedulers and, on PostgreSQL,
	// two streaming relays of one group (one streams, one waits to take
	// over) publishing beside the polling ones, which poll slowly there
	roles := []string{"relay", "relay", "relay", "scheduler", "scheduler"}
	if db.Dialect().Family() == "postgres" {
		roles = append(roles, "streamer", "streamer")
	}
	for i, role := range roles {
		if err := s.spawn(i, role); err != nil {
			return fail(err)
		}
	}
	var wg sync.WaitGroup
	goFn := func(fn func(context.Context)) {
		wg.Add(1)
		go func() { defer wg.Done(); fn(runCtx) }()
	}
	goFn(s.produce)
	goFn(s.replays)
	for i := 0; i < 3; i++ {
		goFn(func(ctx context.Context) { s.leaseWorker(ctx, i) })
	}
	sess, err := s.sessionSetup(ctx)
	if err != nil {
		return fail(err)
	}
	for i := 0; i < 4; i++ {
		goFn(func(ctx context.Context) { s.sessionUpdater(ctx, sess) })
	}
	goFn(s.sessionChurn)
	goFn(s.cleanups)
	goFn(s.faults)
	if cfg.restartEvery > 0 {
		goFn(func(ctx context.Context) { s.restarts(ctx, srv) })
	}
	goFn(s.sampler)
	wg.Wait()
	say("load stopped after %v; draining", cfg.dur)
	s.drainAndCheck(ctx)
	s.stopChildren()
	judgeGrowth(rep)
	for _, v := range rep.Invariants {
		if v != "ok" {
			rep.Failed = true
		}
	}
	for _, v := range rep.Growth {
		if strings.HasPrefix(v, "GROWING") {
			rep.Failed = true
		}
	}
	return rep
}

func createTables(ctx context.Context, db *sqlcoord.DB) error {
	stmts := []string{
		`CREATE TABLE soak_orders (id BIGINT PRIMARY KEY)`,
		`CREATE TABLE soak_effects (order_id BIGINT PRIMARY KEY, deliveries INT NOT NULL, first_by VARCHAR(16) NOT NULL)`,
		`CREATE TABLE soak_job_effects (id BIGINT PRIMARY KEY AUTO_INCREMENT, fire_time DATETIME(6) NOT NULL, shard INT NOT NULL, attempt INT NOT NULL)`,
		`CREATE TABLE soak_lease_log (id BIGINT PRIMARY KEY AUTO_INCREMENT, token BIGINT NOT NULL, worker INT NOT NULL)`,
	}
	if db.Dialect().Family() == "postgres" {
		stmts[2] = `CREATE TABLE soak_job_effects (id bigserial PRIMARY KEY, fire_time timestamptz NOT NULL, shard int NOT NULL, attempt int NOT NULL)`
		stmts[3] = `CREATE TABLE soak_lease_log (id bigserial PRIMARY KEY, token bigint NOT NULL, worker int NOT NULL)`
	}
	for _, q := range stmts {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

type childProc struct {
	killed    atomic.Bool // by the fault injector (respawned without a word)
	role      string
	cmd       *exec.Cmd
	goroutine atomic.Int64
	heap      atomic.Int64
}

type soakRun struct {
	db       *sqlcoord.DB
	dsn      string
	cfg      config
	rep      *report
	say      func(string, ...any)
	mu       sync.Mutex
	children map[int]*childProc
	stopping atomic.Bool

	orders, errs atomic.Int64
	latMu        sync.Mutex
	lat          []time.Duration
	seq          atomic.Int64
	sessOK       atomic.Int64
	sessAmbig    atomic.Int64
	// recent is the newest order committed; keyReplays and keysForgotten
	// count what recording its key again did
	recent, keyReplays, keysForgotten atomic.Int64
}

func (s *soakRun) event(f string, a ...any) {
	e := fmt.Sprintf(f, a...)
	s.say("%s", e)
	s.mu.Lock()
	s.rep.Events = append(s.rep.Events, time.Now().UTC().Format("15:04:05")+" "+e)
	s.mu.Unlock()
}

// spawn starts child i (the same binary with -role), its DSN in the
// environment (never on a command line or in output).
func (s *soakRun) spawn(i int, role string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(self, "-role", role)
	cmd.Env = append(os.Environ(), "SOAK_DSN="+s.dsn, "SOAK_CHILD="+strconv.Itoa(i))
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // none outlives the soak
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	c := &childProc{role: role, cmd: cmd}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var st struct{ Goroutines, Heap int64 }
			if json.Unmarshal(sc.Bytes(), &st) == nil {
				c.goroutine.Store(st.Goroutines)
				c.heap.Store(st.Heap)
			}
		}
		err := cmd.Wait()
		if s.stopping.Load() {
			return
		}
		if !c.killed.Load() {
			s.event("%s %d exited by itself (%v): restarted", role, i, err)
		}
		time.Sleep(time.Second)
		if err := s.spawn(i, role); err != nil {
			s.event("respawn %s %d: %v", role, i, err)
		}
	}()
	s.mu.Lock()
	s.children[i] = c
	s.mu.Unlock()
	return nil
}

func (s *soakRun) stopChildren() {
	s.stopping.Store(true)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.children {
		c.cmd.Process.Signal(syscall.SIGCONT)
		c.cmd.Process.Signal(syscall.SIGTERM)
	}
	time.Sleep(2 * time.Second)
	for _, c := range s.children {
		c.cmd.Process.Kill()
	}
}

// produce inserts an order and enqueues its message in one transaction,
// at cfg.rate per second from up to 8 goroutines.
func (s *soakRun) produce(ctx context.Context) {
	ob := outbox.New(s.db)
	keys := txn.NewKeys(s.db, txn.KeysOptions{})
	ph := s.db.Dialect().Placeholder
	tick := time.NewTicker(time.Second / time.Duration(s.cfg.rate))
	defer tick.Stop()
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		select {
		case sem <- struct{}{}:
		default:
			continue // 8 in flight (a restart): this tick's order is not made
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			id := s.seq.Add(1)
			t0 := time.Now()
			err := func() error {
				tx, err := s.db.BeginTx(ctx, nil)
				if err != nil {
					return err
				}
				defer tx.Rollback()
				if _, err := tx.ExecContext(ctx, `INSERT INTO soak_orders (id) VALUES (`+ph(1)+`)`, id); err != nil {
					return err
				}
				if err := ob.Enqueue(ctx, tx, outbox.Msg{Topic: "soak.orders", Key: strconv.FormatInt(id%16, 10), Payload: []byte(strconv.FormatInt(id, 10))}); err != nil {
					return err
				}
				// the request's idempotency key, recorded with its effect
				if c, err := keys.Record(ctx, tx, "soak", "o"+strconv.FormatInt(id, 10), nil, []byte("ok")); err != nil || c.Replay {
					return fmt.Errorf("key of order %d: replay %v, %w", id, c.Replay, err)
				}
				if err := tx.Commit(); err != nil {
					return err
				}
				s.recent.Store(id)
				return nil
			}()
			if err != nil {
				s.errs.Add(1) // the order and its message: both or neither
				return
			}
			s.orders.Add(1)
			s.latMu.Lock()
			s.lat = append(s.lat, time.Since(t0))
			s.latMu.Unlock()
		}()
	}
}

// replays records again, every 100 ms, the idempotency key of an order
// committed a moment ago: it must replay (a key inside its protection is
// never forgotten, whatever the cleanup or the partitions do). A key that
// was new again counts as forgotten.
func (s *soakRun) replays(ctx context.Context) {
	keys := txn.NewKeys(s.db, txn.KeysOptions{})
	for sleep(ctx, 100*time.Millisecond) {
		id := s.recent.Load()
		if id == 0 {
			continue
		}
		tx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			continue
		}
		c, err := keys.Record(ctx, tx, "soak", "o"+strconv.FormatInt(id, 10), nil, []byte("ok"))
		tx.Rollback()
		switch {
		case err != nil:
		case c.Replay:
			s.keyReplays.Add(1)
		default:
			s.keysForgotten.Add(1)
			s.event("key of order %d, committed a moment ago, was new again", id)
		}
	}
}

// leaseWorker takes turns on one lease with two others: AcquireWait, keep
// it alive for 0.5–2 s while writing fenced rows every 100 ms, release.
func (s *soakRun) leaseWorker(ctx context.Context, w int) {
	c := coord.New(s.db)
	ph := s.db.Dialect().Placeholder
	for ctx.Err() == nil {
		l, err := c.AcquireWait(ctx, "soak-leader", "", 2*time.Second)
		if err != nil {
			sleep(ctx, 100*time.Millisecond)
			continue
		}
		k, err := c.KeepAlive(ctx, l, coord.KeepAliveOptions{})
		if err != nil {
			continue
		}
		until := time.Now().Add(time.Duration(500+rand.IntN(1500)) * time.Millisecond)
		for time.Now().Before(until) && k.Context().Err() == nil {
			tx, err := s.db.BeginTx(k.Context(), nil)
			if err == nil {
				if err = c.Fence(k.Context(), tx, "soak-leader", l.Token); err == nil {
					if _, err = tx.ExecContext(k.Context(), `INSERT INTO soak_lease_log (token, worker) VALUES (`+ph(1)+`, `+ph(2)+`)`, l.Token, w); err == nil {
						err = tx.Commit()
					}
				}
				if err != nil {
					tx.Rollback()
				}
			}
			sleep(k.Context(), 100*time.Millisecond)
		}
		k.Release(context.WithoutCancel(ctx))
	}
}

func (s *soakRun) sessionStore() *session.Store[*sql.Tx] {
	st, _ := session.NewStore(s.db, session.Options{IdleTimeout: time.Second, AbsoluteTimeout: 2 * time.Hour})
	return st
}

func (s *soakRun) sessionSetup(ctx context.Context) (string, error) {
	st, _ := session.NewStore(s.db, session.Options{IdleTimeout: time.Hour, AbsoluteTimeout: 24 * time.Hour})
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return "", err
	}
	defer tx.Rollback()
	tok, _, err := st.Create(ctx, tx, "soak-user", []byte("0"))
	if err != nil {
		return "", err
	}
	return tok, tx.Commit()
}

// sessionUpdater adds 1 to the shared session's counter (Update: a
// compare-and-swap on the version, retried on conflicts).
func (s *soakRun) sessionUpdater(ctx context.Context, tok string) {
	st, _ := session.NewStore(s.db, session.Options{IdleTimeout: time.Hour, AbsoluteTimeout: 24 * time.Hour})
	for ctx.Err() == nil {
		_, err := st.Update(ctx, tok, func(b []byte) ([]byte, error) {
			n, err := strconv.Atoi(string(b))
			return []byte(strconv.Itoa(n + 1)), err
		})
		switch {
		case err == nil:
			s.sessOK.Add(1)
		case errors.Is(err, session.ErrConflict) || ctx.Err() != nil:
		default:
			s.sessAmbig.Add(1) // a broken connection: the update may have committed
			sleep(ctx, 100*time.Millisecond)
		}
		sleep(ctx, 20*time.Millisecond)
	}
}

// sessionChurn creates short sessions (1 s idle) and loads some: the
// expired ones are the cleanup's.
func (s *soakRun) sessionChurn(ctx context.Context) {
	st := s.sessionStore()
	for ctx.Err() == nil {
		tx, err := s.db.BeginTx(ctx, nil)
		if err == nil {
			var tok string
			if tok, _, err = st.Create(ctx, tx, "churn", []byte("{}")); err == nil && tx.Commit() == nil {
				st.Load(ctx, tok)
			} else {
				tx.Rollback()
			}
		}
		sleep(ctx, 20*time.Millisecond)
	}
}

// cleanups runs every table's cleanup every 10 s.
func (s *soakRun) cleanups(ctx context.Context) {
	ob := outbox.New(s.db)
	keys := txn.NewKeys(s.db, txn.KeysOptions{})
	runs := jobs.NewRuns(s.db)
	for sleep(ctx, 10*time.Second) {
		if s.cfg.partSize > 0 {
			res, err := partitions.Roll(ctx, s.db, partitions.RollOptions{OlderThan: 30 * time.Second})
			switch {
			case err != nil && ctx.Err() == nil:
				s.event("partitions roll: %v", err)
			case len(res.Created)+len(res.Dropped) > 0:
				s.event("partitions roll: %v", res)
			}
		} else {
			ob.Cleanup(ctx, 30*time.Second, 1000)
		}
		if s.cfg.keyPeriod > 0 {
			res, err := partitions.RollKeys(ctx, s.db, partitions.KeysOptions{})
			switch {
			case err != nil && ctx.Err() == nil:
				s.event("partitions roll keys: %v", err)
			case len(res.Created)+len(res.Dropped) > 0:
				s.event("partitions roll keys: %d made, %d dropped", len(res.Created), len(res.Dropped))
			}
		} else {
			keys.Cleanup(ctx, 30*time.Second, 1000)
		}
		session.Cleanup(ctx, s.db, 0, 1000)
		runs.Cleanup(ctx, job, time.Minute, 1000)
	}
}

// faults SIGKILLs a random relay or scheduler every killEvery (restarted
// a second later) and SIGSTOPs one for 2–6 s every stopEvery.
func (s *soakRun) faults(ctx context.Context) {
	pick := func() (int, *childProc) {
		s.mu.Lock()
		defer s.mu.Unlock()
		i := rand.IntN(len(s.children))
		return i, s.children[i]
	}
	var killT, stopT <-chan time.Time
	if s.cfg.killEvery > 0 {
		t := time.NewTicker(s.cfg.killEvery)
		defer t.Stop()
		killT = t.C
	}
	if s.cfg.stopEvery > 0 {
		t := time.NewTicker(s.cfg.stopEvery)
		defer t.Stop()
		stopT = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-killT:
			i, c := pick()
			c.killed.Store(true)
			c.cmd.Process.Kill() // restarted a second later by spawn's watcher
			s.event("SIGKILL %s %d (pid %d)", c.role, i, c.cmd.Process.Pid)
		case <-stopT:
			i, c := pick()
			d := time.Duration(2000+rand.IntN(4000)) * time.Millisecond
			c.cmd.Process.Signal(syscall.SIGSTOP)
			s.event("SIGSTOP %s %d for %v", c.role, i, d.Round(time.Millisecond))
			time.AfterFunc(d, func() { c.cmd.Process.Signal(syscall.SIGCONT) })
		}
	}
}

func (s *soakRun) restarts(ctx context.Context, srv *localdb.Server) {
	for sleep(ctx, s.cfg.restartEvery) {
		t0 := time.Now()
		err := srv.Restart(ctx)
		s.event("database restarted in %v (err %v)", time.Since(t0).Round(time.Millisecond), err)
	}
}

// sampler records one sample every cfg.sample.
func (s *soakRun) sampler(ctx context.Context) {
	start := time.Now()
	var lastOrders, lastMaxOrder, lastLog int64
	for sleep(ctx, s.cfg.sample) {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		sm := sample{At: time.Since(start).Seconds(), TableMB: map[string]float64{}}
		o := s.orders.Load()
		sm.OrdersPerS = float64(o-lastOrders) / s.cfg.sample.Seconds()
		lastOrders = o
		sm.Errors = s.errs.Swap(0)
		// orders delivered for the first time since the last sample: a
		// range of the primary key, not a scan of a table that grows
		var d, top int64
		if err := s.db.QueryRowContext(sctx, `SELECT count(*), COALESCE(max(order_id), 0) FROM soak_effects WHERE order_id > `+s.db.Dialect().Placeholder(1), lastMaxOrder).Scan(&d, &top); err == nil {
			sm.DeliveredPerS = float64(d) / s.cfg.sample.Seconds()
			lastMaxOrder = max(lastMaxOrder, top)
		}
		logQ := `SELECT pg_current_wal_lsn() - '0/0'::pg_lsn`
		if s.db.Dialect().Family() != "postgres" {
			logQ = `SELECT CAST(VARIABLE_VALUE AS SIGNED) FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'INNODB_LSN_CURRENT'`
		}
		var lsn float64
		if err := s.db.QueryRowContext(sctx, logQ).Scan(&lsn); err == nil {
			if lastLog > 0 && sm.OrdersPerS > 0 {
				sm.LogPerOrder = (lsn - float64(lastLog)) / (sm.OrdersPerS * s.cfg.sample.Seconds())
			}
			lastLog = int64(lsn)
		}
		lagQ := `SELECT COALESCE(EXTRACT(EPOCH FROM clock_timestamp() - min(created_at)), 0)::float8 FROM coord_outbox WHERE state = 'pending'`
		if s.db.Dialect().Family() != "postgres" {
			lagQ = `SELECT CAST(COALESCE(TIMESTAMPDIFF(MICROSECOND, MIN(created_at), UTC_TIMESTAMP(6)), 0) / 1e6 AS DOUBLE) FROM coord_outbox WHERE state = 'pending'`
		}
		s.db.QueryRowContext(sctx, lagQ).Scan(&sm.RelayLagS)
		s.latMu.Lock()
		lat := s.lat
		s.lat = nil
		s.latMu.Unlock()
		if len(lat) > 0 {
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			sm.EnqueueP50ms = float64(lat[len(lat)/2].Microseconds()) / 1000
			sm.EnqueueP99ms = float64(lat[len(lat)*99/100].Microseconds()) / 1000
		}
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		// both dialects' goroutines run in this process: halve, roughly
		sm.Goroutines, sm.HeapMB = runtime.NumGoroutine(), float64(ms.HeapInuse)/(1<<20)
		s.mu.Lock()
		for _, c := range s.children {
			sm.ChildGoroutines += int(c.goroutine.Load())
			sm.ChildHeapMB += float64(c.heap.Load()) / (1 << 20)
		}
		s.mu.Unlock()
		sm.PoolConns = s.db.Stats().OpenConnections
		pg := s.db.Dialect().Family() == "postgres"
		connQ := `SELECT count(*) FROM information_schema.processlist WHERE db = DATABASE()`
		if pg {
			connQ = `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()`
		}
		if err := s.db.QueryRowContext(sctx, connQ).Scan(&sm.ServerConns); err != nil {
			// the server is restarting: its series keep their last values
			s.mu.Lock()
			if n := len(s.rep.Samples); n > 0 {
				p := s.rep.Samples[n-1]
				sm.ServerConns, sm.TableMB, sm.DeadTuples, sm.Autovacuums, sm.HistoryLength, sm.PurgeLag, sm.SlotMB, sm.OldestXminAge = p.ServerConns, p.TableMB, p.DeadTuples, p.Autovacuums, p.HistoryLength, p.PurgeLag, p.SlotMB, p.OldestXminAge
			}
			s.mu.Unlock()
			sm.ServerDown = true
		} else if pg {
			s.db.QueryRowContext(sctx, `SELECT COALESCE(SUM(n_dead_tup), 0), COALESCE(SUM(autovacuum_count), 0) FROM pg_stat_user_tables WHERE relname LIKE 'coord\_%'`).Scan(&sm.DeadTuples, &sm.Autovacuums)
			s.db.QueryRowContext(sctx, `SELECT COALESCE(max(age(backend_xmin)), 0) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&sm.OldestXminAge)
			if slots, err := outbox.Slots(sctx, s.db); err == nil {
				for _, sl := range slots {
					sm.SlotMB += float64(sl.LagBytes) / (1 << 20)
				}
			}
		} else {
			s.db.QueryRowContext(sctx, `SELECT count FROM information_schema.INNODB_METRICS WHERE name = 'trx_rseg_history_len'`).Scan(&sm.HistoryLength)
			sm.PurgeLag = purgeLag(sctx, s.db)
		}
		for _, t := range tables {
			if sm.ServerDown {
				break
			}
			var b float64
			// summed over a partitioned table's partitions (and
			// MariaDB's history table set aside by partitions.Enable)
			q := `SELECT COALESCE(SUM(pg_table_size(relid) + pg_indexes_size(relid)), 0)::float8 FROM pg_partition_tree('` + t + `')`
			if !pg {
				q = `SELECT CAST(COALESCE(SUM(data_length + index_length), 0) AS DOUBLE) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name IN ('` + t + `', '` + t + `_legacy')`
			}
			if err := s.db.QueryRowContext(sctx, q).Scan(&b); err == nil {
				sm.TableMB[t] = b / (1 << 20)
			}
		}
		cancel()
		s.mu.Lock()
		s.rep.Samples = append(s.rep.Samples, sm)
		s.mu.Unlock()
		s.say("%6.0fs orders %5.0f/s delivered %5.0f/s p50 %5.1f p99 %6.1f ms goroutines %d+%d heap %.0f+%.0f MB conns %d/%d outbox %.1f MB runs %.1f MB sessions %.1f MB dead %d hist %d slot %.1f MB",
			sm.At, sm.OrdersPerS, sm.DeliveredPerS, sm.EnqueueP50ms, sm.EnqueueP99ms, sm.Goroutines, sm.ChildGoroutines, sm.HeapMB, sm.ChildHeapMB, sm.PoolConns, sm.ServerConns,
			sm.TableMB["coord_outbox"], sm.TableMB["coord_job_runs"], sm.TableMB["coord_sessions"], sm.DeadTuples, sm.HistoryLength, sm.SlotMB)
	}
}

// drainAndCheck waits for the relays to publish every committed order
// (at most 2 minutes), then checks the invariants.
func (s *soakRun) drainAndCheck(ctx context.Context) {
	db := s.db
	count := func(q string) int64 {
		var n int64
		for i := 0; i < 30; i++ { // a restart may be under way
			if err := db.QueryRowContext(ctx, q).Scan(&n); err == nil {
				return n
			}
			sleep(ctx, time.Second)
		}
		return -1
	}
	// every child running again (a stopped one continued)
	s.mu.Lock()
	for _, c := range s.children {
		c.cmd.Process.Signal(syscall.SIGCONT)
	}
	s.mu.Unlock()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		if count(`SELECT count(*) FROM soak_orders o WHERE NOT EXISTS (SELECT 1 FROM soak_effects e WHERE e.order_id = o.id)`) == 0 {
			break
		}
		sleep(ctx, time.Second)
	}
	inv := s.rep.Invariants
	orders := count(`SELECT count(*) FROM soak_orders`)
	check := func(name string, bad int64, what string) {
		if bad == 0 {
			inv[name] = "ok"
		} else {
			inv[name] = fmt.Sprintf("FAILED: %d %s", bad, what)
		}
	}
	check("outbox: every committed order delivered (nothing lost)",
		count(`SELECT count(*) FROM soak_orders o WHERE NOT EXISTS (SELECT 1 FROM soak_effects e WHERE e.order_id = o.id)`), "orders never delivered")
	check("outbox: no delivery without its order (nothing invented)",
		count(`SELECT count(*) FROM soak_effects e WHERE NOT EXISTS (SELECT 1 FROM soak_orders o WHERE o.id = e.order_id)`), "deliveries of orders that never committed")
	check("jobs: no slot shard's effect written twice",
		count(`SELECT count(*) FROM (SELECT fire_time, shard FROM soak_job_effects GROUP BY fire_time, shard HAVING count(*) > 1) d`), "slot shards with two effects")
	check("keys: the key of an order committed a moment ago replays, never new again", s.keysForgotten.Load(), "keys new again")
	check("leases: fenced writes in token order",
		count(`SELECT count(*) FROM soak_lease_log a JOIN soak_lease_log b ON b.id > a.id AND b.token < a.token`), "writes after a newer token's")
	var data []byte
	db.QueryRowContext(ctx, `SELECT data FROM coord_sessions WHERE user_id = 'soak-user'`).Scan(&data)
	n, _ := strconv.ParseInt(string(data), 10, 64)
	ok, amb := s.sessOK.Load(), s.sessAmbig.Load()
	switch {
	case n < ok:
		inv["sessions: no lost update"] = fmt.Sprintf("FAILED: counter %d, %d updates succeeded", n, ok)
	case n > ok+amb:
		inv["sessions: no lost update"] = fmt.Sprintf("FAILED: counter %d above %d successes + %d ambiguous", n, ok, amb)
	default:
		inv["sessions: no lost update"] = "ok"
	}
	if db.Dialect().Family() != "postgres" {
		// what MariaDB's history list does once the load stopped
		var h0, h1 int64
		db.QueryRowContext(ctx, `SELECT count FROM information_schema.INNODB_METRICS WHERE name = 'trx_rseg_history_len'`).Scan(&h0)
		s.stopChildren()
		for i := 0; i < 60; i++ {
			sleep(ctx, time.Second)
			db.QueryRowContext(ctx, `SELECT count FROM information_schema.INNODB_METRICS WHERE name = 'trx_rseg_history_len'`).Scan(&h1)
			if h1 < 1000 {
				break
			}
		}
		s.event("history list length once the load stopped: %d, a minute later at most: %d (purge lag %d transactions)", h0, h1, purgeLag(ctx, db))
	}
	dups := count(`SELECT COALESCE(SUM(deliveries - 1), 0) FROM soak_effects`)
	if db.Dialect().Family() == "postgres" {
		s.event("first deliveries: %d by the streaming relays, %d by the polling ones",
			count(`SELECT count(*) FROM soak_effects WHERE first_by = 'streamer'`), count(`SELECT count(*) FROM soak_effects WHERE first_by = 'relay'`))
	}
	jobsDone := count(`SELECT count(*) FROM soak_job_effects`)
	leaseWrites := count(`SELECT count(*) FROM soak_lease_log`)
	s.event("keys recorded again a moment after their order: %d replayed, %d new again", s.keyReplays.Load(), s.keysForgotten.Load())
	s.event("checked: %d orders, %d redeliveries absorbed by the consumer's key, %d job effects, %d fenced lease writes, session counter %d (%d ok, %d ambiguous)",
		orders, dups, jobsDone, leaseWrites, n, ok, amb)
}

// judgeGrowth compares each series' mean over the last quarter of the run
// with its mean over the second quarter: growing without bound if the
// later is above 1.5× the earlier plus a slack.
func judgeGrowth(rep *report) {
	n := len(rep.Samples)
	if n < 8 {
		rep.Growth["all"] = "too short to judge (fewer than 8 samples)"
		return
	}
	series := map[string]func(sample) float64{
		"goroutines (this process)":      func(s sample) float64 { return float64(s.Goroutines) },
		"heap MB (this process)":         func(s sample) float64 { return s.HeapMB },
		"goroutines (children)":          func(s sample) float64 { return float64(s.ChildGoroutines) },
		"heap MB (children)":             func(s sample) float64 { return s.ChildHeapMB },
		"pool connections":               func(s sample) float64 { return float64(s.PoolConns) },
		"server connections":             func(s sample) float64 { return float64(s.ServerConns) },
		"dead tuples":                    func(s sample) float64 { return float64(s.DeadTuples) },
		"purge lag (transactions)":       func(s sample) float64 { return float64(s.PurgeLag) },
		"slot's retained WAL MB":         func(s sample) float64 { return s.SlotMB },
		"oldest xmin age (transactions)": func(s sample) float64 { return float64(s.OldestXminAge) },
		"history list length":            func(s sample) float64 { return float64(s.HistoryLength) },
		"log bytes per order":            func(s sample) float64 { return s.LogPerOrder },
		"relay lag s":                    func(s sample) float64 { return s.RelayLagS },
		"enqueue p50 ms":                 func(s sample) float64 { return s.EnqueueP50ms },
		"enqueue p99 ms":                 func(s sample) float64 { return s.EnqueueP99ms },
	}
	// A waiter holds no snapshot and no read view: a horizon pinned by one
	// shows as a growing xmin age (PostgreSQL) or history list (MariaDB).
	slack := map[string]float64{"goroutines (this process)": 30, "goroutines (children)": 30, "heap MB (this process)": 16, "heap MB (children)": 16,
		"pool connections": 10, "server connections": 10, "dead tuples": 50_000, "purge lag (transactions)": 20_000, "slot's retained WAL MB": 64,
		"oldest xmin age (transactions)": 20_000, "history list length": 50_000, "log bytes per order": 2000, "relay lag s": 2,
		"enqueue p50 ms": 2, "enqueue p99 ms": 20}
	if rep.Dialect != "postgres" {
		delete(series, "slot's retained WAL MB") // no streaming relay
		delete(series, "oldest xmin age (transactions)")
	} else {
		delete(series, "history list length")
	}
	for _, t := range tables {
		series[t+" MB"] = func(s sample) float64 { return s.TableMB[t] }
		slack[t+" MB"] = 4
	}
	mean := func(f func(sample) float64, from, to int) float64 {
		var sum float64
		for _, s := range rep.Samples[from:to] {
			sum += f(s)
		}
		return sum / float64(to-from)
	}
	for name, f := range series {
		mid, last := mean(f, n/4, n/2), mean(f, n*3/4, n)
		rise, noise := trend(rep.Samples[n/2:], f)
		v := fmt.Sprintf("bounded: %.1f in the second quarter, %.1f in the last; over the last half a fitted rise of %.1f (noise %.1f)", mid, last, rise, noise)
		if last > 1.5*mid+slack[name] || rise > 2*noise+slack[name] {
			v = "GROWING: " + v[len("bounded: "):]
		}
		rep.Growth[name] = v
	}
}

// trend fits a line to a series by least squares: rise is how much the
// line climbs over the samples' span, noise the residuals' standard
// deviation (a flat series rises by less than its noise).
func trend(ss []sample, f func(sample) float64) (rise, noise float64) {
	n := float64(len(ss))
	if n < 3 {
		return 0, 0
	}
	var sx, sy, sxx, sxy float64
	for _, s := range ss {
		x, y := s.At, f(s)
		sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	den := n*sxx - sx*sx
	if den == 0 {
		return 0, 0
	}
	slope := (n*sxy - sx*sy) / den
	icept := (sy - slope*sx) / n
	var ss2 float64
	for _, s := range ss {
		r := f(s) - (icept + slope*s.At)
		ss2 += r * r
	}
	return slope * (ss[len(ss)-1].At - ss[0].At), math.Sqrt(ss2 / n)
}

// purgeLag is how many transactions InnoDB's purge is behind (from SHOW
// ENGINE INNODB STATUS: Trx id counter minus "Purge done for trx's n:o <").
func purgeLag(ctx context.Context, db *sqlcoord.DB) int64 {
	var typ, name, status string
	if err := db.QueryRowContext(ctx, `SHOW ENGINE INNODB STATUS`).Scan(&typ, &name, &status); err != nil {
		return 0
	}
	var counter, done int64
	for _, l := range strings.Split(status, "\n") {
		if strings.HasPrefix(l, "Trx id counter ") {
			fmt.Sscanf(l, "Trx id counter %d", &counter)
		} else if strings.HasPrefix(l, "Purge done for trx's n:o < ") {
			fmt.Sscanf(l, "Purge done for trx's n:o < %d", &done)
		}
	}
	if counter == 0 || done == 0 {
		return 0
	}
	return counter - done
}

// sleep waits d or until ctx ends; false when ctx ended.
func sleep(ctx context.Context, d time.Duration) bool { return backoff.Sleep(ctx, d) == nil }

// child is a relay or a scheduler process; it reports its goroutines and
// heap on stdout every second.
func child(ctx context.Context, role string) error {
	dsn := os.Getenv("SOAK_DSN")
	db, err := sqlcoord.Open(ctx, dsn, sqlcoord.Options{MaxOpenConns: 16})
	if err != nil {
		return err
	}
	defer db.Close()
	go func() {
		for sleep(ctx, time.Second) {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			fmt.Printf(`{"goroutines":%d,"heap":%d}`+"\n", runtime.NumGoroutine(), ms.HeapInuse)
		}
	}()
	ph := db.Dialect().Placeholder
	// relays publish into the consumer table, counting deliveries
	// (first_by: which kind of relay delivered it first)
	upsert := `INSERT INTO soak_effects (order_id, deliveries, first_by) VALUES ($1, 1, $2) ON CONFLICT (order_id) DO UPDATE SET deliveries = soak_effects.deliveries + 1`
	if db.Dialect().Family() != "postgres" {
		upsert = `INSERT INTO soak_effects (order_id, deliveries, first_by) VALUES (?, 1, ?) ON DUPLICATE KEY UPDATE deliveries = deliveries + 1`
	}
	pub := outbox.PublisherFunc(func(ctx context.Context, m outbox.Message) error {
		id, err := strconv.ParseInt(string(m.Payload), 10, 64)
		if err != nil {
			return err
		}
		_, err = db.ExecContext(ctx, upsert, id, role)
		return err
	})
	switch role {
	case "relay":
		opt := outbox.RelayOptions{BatchSize: 100}
		if db.Dialect().Family() == "postgres" {
			// beside the streaming relays: poll slowly, so the stream
			// publishes most messages and the polling relays what it
			// leaves while it is down
			opt.Listen, opt.PollMin, opt.PollMax, opt.PollBusy = outbox.ListenOff, 500*time.Millisecond, 2*time.Second, 500*time.Millisecond
		}
		r, err := outbox.NewRelay(db, pub, opt)
		if err != nil {
			return err
		}
		return r.Run(ctx)
	case "streamer":
		r, err := pgstream.New(db, pub, pgstream.Options{DSN: dsn, Group: "soak", BatchSize: 100})
		if err != nil {
			return err
		}
		return r.Run(ctx)
	case "scheduler":
		sch := jobs.NewScheduler(db, jobs.Options{})
		err := sch.Register(jobs.Job{Name: job, Schedule: "* * * * * *", Shards: 4, ShardConcurrency: 4, Grace: 5 * time.Second,
			Run: func(ctx context.Context, in jobs.Info) error {
				sleep(ctx, time.Duration(100+rand.IntN(400))*time.Millisecond)
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					return err
				}
				defer tx.Rollback()
				if err := jobs.Fence(ctx, db, tx, in.Run()); err != nil {
					return err
				}
				if _, err := tx.ExecContext(ctx, `INSERT INTO soak_job_effects (fire_time, shard, attempt) VALUES (`+ph(1)+`, `+ph(2)+`, `+ph(3)+`)`, in.FireTime, in.Shard, in.Attempt); err != nil {
					return err
				}
				if err := jobs.Complete(ctx, db, tx, in.Run()); err != nil {
					return err
				}
				return tx.Commit()
			}})
		if err != nil {
			return err
		}
		return sch.Run(ctx)
	}
	return fmt.Errorf("unknown role %q", role)
}
