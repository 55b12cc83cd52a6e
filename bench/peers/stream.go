package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/outbox"
	"github.com/sqlcoord/sqlcoord/outbox/pgstream"
	"github.com/sqlcoord/sqlcoord/txn"
)

// --- the streaming relay (logical replication) beside the polling relay ---

// relayKind names a relay configuration of the latency and cost runs.
type relayKind string

const (
	streaming relayKind = "stream"
	polling   relayKind = "poll" // the default relay: LISTEN/NOTIFY wake-up on PostgreSQL
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// startRelay runs one relay of kind until the returned stop; with wait,
// it returns once the relay publishes (a probe message went through).
func startRelay(ctx context.Context, db *sqlcoord.DB, kind relayKind, pub outbox.Publisher, del, wait bool) (stop func(), err error) {
	probe := uuid.NewString()
	up := make(chan struct{})
	var once sync.Once
	wrapped := outbox.PublisherFunc(func(ctx context.Context, m outbox.Message) error {
		if m.UUID == probe {
			once.Do(func() { close(up) })
			return nil
		}
		return pub.Publish(ctx, m)
	})
	var run func(context.Context) error
	switch kind {
	case streaming:
		r, err := pgstream.New(db, wrapped, pgstream.Options{BatchSize: 1000, DeleteOnPublish: del, Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
		if err != nil {
			return nil, err
		}
		run = r.Run
	default:
		r, err := outbox.NewRelay(db, wrapped, outbox.RelayOptions{BatchSize: 1000, DeleteOnPublish: del, Logger: quiet, SleepBelow: *sleepBelow, PollBusy: *pollBusy})
		if err != nil {
			return nil, err
		}
		run = r.Run
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); run(rctx) }()
	stop = func() { cancel(); <-done }
	if !wait {
		return stop, nil // a relay joining others that publish already
	}
	if err := outbox.New(db).EnqueueNow(ctx, outbox.Msg{ID: probe, Topic: "probe", Payload: []byte("{}")}); err != nil {
		stop()
		return nil, err
	}
	select {
	case <-up:
		return stop, nil
	case <-time.After(time.Minute):
		stop()
		return nil, fmt.Errorf("%s relay did not start", kind)
	}
}

// streamDrain times the streaming relay through a backlog of *msgs
// messages waiting in its slot (made first, so the backlog comes from the
// WAL, not the first polling pass); rows are marked published (kept).
func streamDrain(ctx context.Context, db *sqlcoord.DB) (float64, error) {
	none := outbox.PublisherFunc(func(context.Context, outbox.Message) error { return nil })
	stop, err := startRelay(ctx, db, streaming, none, false, true)
	if err != nil {
		return 0, err
	}
	stop()
	defer func() {
		outbox.DropStreamSlot(ctx, db, "outbox")
		db.ExecContext(ctx, `DELETE FROM coord_outbox`)
	}()
	if err := prefill(ctx, db, *msgs); err != nil {
		return 0, err
	}
	u := newUnique(*msgs)
	pub := outbox.PublisherFunc(func(_ context.Context, m outbox.Message) error { u.add(m.UUID); return nil })
	r, err := pgstream.New(db, pub, pgstream.Options{BatchSize: 1000, Logger: quiet})
	if err != nil {
		return 0, err
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	start := time.Now()
	go func() { defer close(done); r.Run(rctx) }()
	werr := u.wait("stream drain", 10*time.Minute)
	el := time.Since(start)
	cancel()
	<-done
	u.recordDups()
	return float64(*msgs) / el.Seconds(), werr
}

// latencyRun is one system at one offered rate: commit→delivery
// percentiles (from the producer's Commit returning to the consumer
// seeing the message), the rate achieved, and the database's CPU per
// 1,000 messages.
type latencyRun struct {
	p50, p99      time.Duration
	p90, p999     time.Duration
	max           time.Duration
	n             int // messages measured
	lost          int // committed and not delivered within a minute after the producers stopped
	rate          float64
	cpuPerK       float64       // ms of server CPU per 1,000 messages
	decodePerK    float64       // of which the replication connection's (logical decoding), streaming relay only
	idleCPUPerMin float64       // ms of server CPU per minute while idle (relay running, no producers)
	idleXactsMin  float64       // transactions per minute while idle
	txP50         time.Duration // the producers' transaction (BEGIN, Enqueue, COMMIT), median
}

// latencySystem is what a commit→delivery run measures: start begins
// consuming (deliver is called with each message's id as its consumer
// sees it) and returns once it consumes; produce commits one message in a
// transaction of its own; cpu (optional) is the consumer's server CPU so
// far, in ms; clear empties the queue after the run.
type latencySystem struct {
	start   func(ctx context.Context, deliver func(id string)) (stop func(), err error)
	produce func(ctx context.Context, id string) error
	cpu     func() int64
	decode  func() int64 // of cpu, the replication connection's (optional)
	clear   func()
}

// relaySystem: n relays of kind on relayDB, producers Enqueue on db.
func relaySystem(ctx context.Context, db, relayDB *sqlcoord.DB, kind relayKind, n int) latencySystem {
	ob := outbox.New(db)
	return latencySystem{
		start: func(ctx context.Context, deliver func(string)) (func(), error) {
			pub := outbox.PublisherFunc(func(_ context.Context, m outbox.Message) error { deliver(m.UUID); return nil })
			var stops []func()
			stopAll := func() {
				for _, s := range stops {
					s()
				}
			}
			for i := range n {
				stop, err := startRelay(ctx, relayDB, kind, pub, !*keepRows, i == 0)
				if err != nil {
					stopAll()
					return nil, err
				}
				stops = append(stops, stop)
			}
			return stopAll, nil
		},
		produce: func(ctx context.Context, id string) error {
			return txn.Do(ctx, db, txn.Options{}, func(ctx context.Context, tx *sql.Tx) error {
				return ob.Enqueue(ctx, tx, outbox.Msg{ID: id, Topic: "orders.created", Payload: []byte(`{"order":1}`)})
			})
		},
		cpu: func() int64 { return relayCPU(ctx, db) },
		decode: func() int64 {
			return backendCPU(ctx, db, `SELECT pid FROM pg_stat_activity WHERE application_name LIKE 'sqlcoord-stream-%'`)
		},
		clear: func() {
			if kind == streaming {
				outbox.DropStreamSlot(ctx, db, "outbox")
			}
			db.ExecContext(ctx, `DELETE FROM coord_outbox`)
		},
	}
}

func measureLatency(ctx context.Context, db, relayDB *sqlcoord.DB, kind relayKind, offered int, dur time.Duration) (latencyRun, error) {
	r, _, err := runLatency(ctx, relaySystem(ctx, db, relayDB, kind, 1), string(kind), offered, dur)
	if err == nil && r.lost > 0 {
		err = fmt.Errorf("%s relay: %d messages undelivered", kind, r.lost)
	}
	return r, err
}

// runLatency offers sys messages at offered msgs/s from 32 producers for
// dur and measures commit→delivery of each.
func runLatency(ctx context.Context, sys latencySystem, kind string, offered int, dur time.Duration) (latencyRun, []time.Duration, error) {
	var out latencyRun
	var mu sync.Mutex
	committed := map[string]time.Time{}
	delivered := map[string]time.Time{}
	var lat []time.Duration
	record := func(id string, commit, del time.Time) { lat = append(lat, max(del.Sub(commit), 0)) }
	deliver := func(id string) {
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		if c, ok := committed[id]; ok {
			record(id, c, now)
			delete(committed, id)
		} else {
			delivered[id] = now // before Commit returned to the producer
		}
	}
	stop, err := sys.start(ctx, deliver)
	if err != nil {
		return out, nil, err
	}
	defer func() {
		stop()
		sys.clear()
	}()
	const producers = 32
	per := time.Duration(float64(time.Second) * producers / float64(offered))
	pctx, cancel := context.WithTimeout(ctx, dur)
	defer cancel()
	cpu := sys.cpu
	if cpu == nil {
		cpu = func() int64 { return 0 }
	}
	decode := sys.decode
	if decode == nil {
		decode = func() int64 { return 0 }
	}
	c0, d0 := cpu(), decode()
	var wg sync.WaitGroup
	var sent int64
	var sm sync.Mutex
	var txLat []time.Duration
	start := time.Now()
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			next := time.Now().Add(time.Duration(p) * per / producers)
			for {
				time.Sleep(time.Until(next))
				next = next.Add(per)
				if pctx.Err() != nil {
					return
				}
				id := uuid.NewString()
				t0 := time.Now()
				err := sys.produce(pctx, id)
				now := time.Now()
				if err != nil {
					continue
				}
				sm.Lock()
				sent++
				txLat = append(txLat, now.Sub(t0))
				sm.Unlock()
				mu.Lock()
				if d, ok := delivered[id]; ok {
					record(id, now, d)
					delete(delivered, id)
				} else {
					committed[id] = now
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	deadline := time.Now().Add(time.Minute)
	for {
		mu.Lock()
		left := len(committed)
		mu.Unlock()
		if left == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	c1, d1 := cpu(), decode()
	mu.Lock()
	defer mu.Unlock()
	if len(lat) == 0 {
		return out, nil, fmt.Errorf("%s: no message", kind)
	}
	out = dist(lat)
	out.lost = len(committed)
	sort.Slice(txLat, func(i, j int) bool { return txLat[i] < txLat[j] })
	out.txP50 = txLat[len(txLat)/2]
	out.rate = float64(sent) / el.Seconds()
	out.cpuPerK = float64(c1-c0) / float64(sent) * 1000
	out.decodePerK = float64(d1-d0) / float64(sent) * 1000
	return out, lat, nil
}

// xacts is the database's committed transactions so far.
func xacts(ctx context.Context, db *sqlcoord.DB) int64 {
	var n int64
	if db.Dialect().Family() != "postgres" {
		return 0 // not measured on MariaDB here
	}
	db.QueryRowContext(ctx, `SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()`).Scan(&n)
	return n
}

// relayApp is the application_name of the relays' connections here
// (the streaming relay's replication connection adds its own).
const relayApp = "sqlcoord_bench_relay"

// relayCPU is the CPU time, in ms, the server's backends for the relay
// (its pool and its replication connection) have used so far: their
// processes' utime+stime.
func relayCPU(ctx context.Context, db *sqlcoord.DB) int64 {
	return backendCPU(ctx, db, `SELECT pid FROM pg_stat_activity WHERE application_name = $1 OR application_name LIKE 'sqlcoord-stream-%'`, relayApp)
}

// backendCPU is the CPU time, in ms, of the backends whose pids q lists.
func backendCPU(ctx context.Context, db *sqlcoord.DB, q string, args ...any) int64 {
	if db.Dialect().Family() != "postgres" {
		return 0 // not measured on MariaDB here
	}
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return 0
	}
	defer rows.Close()
	ticks := int64(0)
	for rows.Next() {
		var pid int
		rows.Scan(&pid)
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
		if err != nil {
			continue
		}
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
		if len(f) < 13 { // after the name: state ppid … utime(11) stime(12)
			continue
		}
		for i := 11; i <= 12; i++ {
			v, _ := strconv.ParseInt(f[i], 10, 64)
			ticks += v
		}
	}
	return ticks * 10 // USER_HZ = 100
}

// streamRows: the streaming relay beside the polling one (and River) on
// PostgreSQL: drain, commit→delivery at 1,000 and 10,000 msgs/s, server
// CPU per 1,000 messages and while idle.
func streamRows(ctx context.Context, db *sqlcoord.DB, dsn string, river func() (float64, error)) []row {
	relayDB := openRelayDB(ctx, dsn)
	defer relayDB.Close()
	var rows []row
	rows = append(rows, compare(fmt.Sprintf("outbox drain PG, streaming relay (backlog in its slot) vs polling relay, 1 each, %d msgs, rows kept", *msgs), "msgs/s", "polling relay",
		func() (float64, error) { return streamDrain(ctx, db) },
		func() (float64, error) { return relayDrain(ctx, db, 1, false) }))
	rows = append(rows, compare(fmt.Sprintf("outbox drain PG, streaming relay vs 1 River client, %d msgs, rows kept", *msgs), "msgs/s", "River",
		func() (float64, error) { return streamDrain(ctx, db) },
		river))
	for _, offered := range []int{100, 1000, 10000} {
		var p50, p99, cpu, rate [2][]float64 // [stream, poll] per round
		var decode []float64                 // the stream's replication connection, per round
		for i := 0; i < *rounds; i++ {
			order := []relayKind{streaming, polling}
			if i%2 == 1 {
				order = []relayKind{polling, streaming}
			}
			for _, k := range order {
				r, err := measureLatency(ctx, db, relayDB, k, offered, *dur*3)
				if err != nil {
					fmt.Fprintf(os.Stderr, "peers: latency %s at %d/s round %d: %v\n", k, offered, i+1, err)
					continue
				}
				j := 0
				if k == polling {
					j = 1
				}
				p50[j] = append(p50[j], float64(r.p50.Microseconds())/1000)
				p99[j] = append(p99[j], float64(r.p99.Microseconds())/1000)
				cpu[j], rate[j] = append(cpu[j], r.cpuPerK), append(rate[j], r.rate)
				fmt.Printf("  %-8s at %5d/s offered: %6.0f/s achieved (producer tx p50 %v), commit→delivery p50 %6.2f ms p99 %6.2f ms, relay's server CPU %6.1f ms per 1,000 msgs (decoding %6.1f)\n",
					k, offered, r.rate, r.txP50.Round(10*time.Microsecond), float64(r.p50.Microseconds())/1000, float64(r.p99.Microseconds())/1000, r.cpuPerK, r.decodePerK)
				if k == streaming {
					decode = append(decode, r.decodePerK)
				}
			}
		}
		name := func(what string) string {
			return fmt.Sprintf("PG %s at %d msgs/s offered, streaming vs polling relay (lower is better)", what, offered)
		}
		rows = append(rows,
			row{name: name("commit→delivery p50"), unit: "ms", peer: "polling relay", ours: p50[0], theirs: p50[1]},
			row{name: name("commit→delivery p99"), unit: "ms", peer: "polling relay", ours: p99[0], theirs: p99[1]},
			row{name: name("relay's server CPU per 1,000 msgs (its backends: pool, replication connection)"), unit: "ms", peer: "polling relay", ours: cpu[0], theirs: cpu[1]},
			row{name: name("of that CPU, the replication connection's (logical decoding) vs the polling relay's whole"), unit: "ms", peer: "polling relay", ours: decode, theirs: cpu[1]},
			row{name: fmt.Sprintf("PG rate achieved at %d msgs/s offered (32 producers, 1 message per transaction)", offered), unit: "msgs/s", peer: "polling relay", ours: rate[0], theirs: rate[1]})
	}
	return rows
}

func openRelayDB(ctx context.Context, dsn string) *sqlcoord.DB {
	relayDB, err := sqlcoord.Open(ctx, dsn+"&application_name="+relayApp, sqlcoord.Options{MaxOpenConns: 8, MaxIdleConns: 8})
	if err != nil {
		fail(err)
	}
	return relayDB
}

// idleRows: what a running relay costs the primary while no message
// comes: the statements its connections send (counted in the server's
// log, log_min_duration_statement = 0 for the window) and its backends'
// CPU, streaming vs polling (LISTEN on: it sleeps between polls).
func idleRows(ctx context.Context, db *sqlcoord.DB, dsn string, window time.Duration) []row {
	relayDB := openRelayDB(ctx, dsn)
	defer relayDB.Close()
	var dataDir string
	if err := db.QueryRowContext(ctx, `SELECT current_setting('data_directory')`).Scan(&dataDir); err != nil {
		fail(err)
	}
	logPath := filepath.Join(filepath.Dir(dataDir), "server.log")
	var stmts, cpu [2][]float64
	none := outbox.PublisherFunc(func(context.Context, outbox.Message) error { return nil })
	for i := 0; i < *rounds; i++ {
		for j, k := range []relayKind{streaming, polling} {
			stop, err := startRelay(ctx, relayDB, k, none, true, true)
			if err != nil {
				fail(err)
			}
			time.Sleep(5 * time.Second) // the poller backs off and falls asleep
			for _, q := range []string{`ALTER SYSTEM SET log_min_duration_statement = 0`, `ALTER SYSTEM SET log_line_prefix = '[%a] '`, `SELECT pg_reload_conf()`} {
				db.ExecContext(ctx, q)
			}
			time.Sleep(200 * time.Millisecond)
			st, _ := os.Stat(logPath)
			c0 := relayCPU(ctx, db)
			time.Sleep(window)
			c1 := relayCPU(ctx, db)
			for _, q := range []string{`ALTER SYSTEM RESET log_min_duration_statement`, `ALTER SYSTEM RESET log_line_prefix`, `SELECT pg_reload_conf()`} {
				db.ExecContext(ctx, q)
			}
			n := countLogLines(logPath, st.Size(), "["+relayApp+"]")
			stop()
			if k == streaming {
				outbox.DropStreamSlot(ctx, db, "outbox")
			}
			db.ExecContext(ctx, `DELETE FROM coord_outbox`)
			stmts[j] = append(stmts[j], float64(n)/window.Minutes())
			cpu[j] = append(cpu[j], float64(c1-c0)/window.Minutes())
			fmt.Printf("  %-8s idle for %v: %d statements from the relay's connections, its backends %d ms CPU\n", k, window, n, c1-c0)
		}
	}
	return []row{
		{name: "PG idle: statements the relay sends, no messages (stream: its lease renewals; lower is better)", unit: "stmts/min", peer: "polling relay", ours: stmts[0], theirs: stmts[1]},
		{name: "PG idle: the relay's backends' server CPU, no messages (lower is better)", unit: "ms/min", peer: "polling relay", ours: cpu[0], theirs: cpu[1]},
	}
}

// countLogLines counts the lines of the log written after offset that
// carry tag and log a statement.
func countLogLines(path string, offset int64, tag string) int {
	f, err := os.Open(path)
	if err != nil {
		return -1
	}
	defer f.Close()
	f.Seek(offset, io.SeekStart)
	b, _ := io.ReadAll(f)
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, tag) && (strings.Contains(l, "statement: ") || strings.Contains(l, " execute ")) {
			n++
		}
	}
	return n
}
