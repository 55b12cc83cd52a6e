// Command peers measures sqlcoord beside its peers on throwaway local
// servers (PostgreSQL 15 and MariaDB, fsync on): the outbox relay against
// River (riverpgxv5) and watermill-sql, Enqueue against watermill-sql's
// publish-in-transaction, the snowflake generator against
// bwmarrin/snowflake. Every comparison runs in interleaved rounds (which
// side goes first alternates) and reports the median of the per-round
// ratios sqlcoord ÷ peer: the machine is shared and noisy, a ratio within
// one run is what can be trusted.
//
// A module of its own (bench/peers/go.mod) so that sqlcoord's go.mod does
// not carry River, watermill or bwmarrin. Run: make bench-peers.
package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/bwmarrin/snowflake"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/coord/ids"
	"github.com/sqlcoord/sqlcoord/migrate"
	"github.com/sqlcoord/sqlcoord/outbox"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/localdb"
)

var (
	rounds     = flag.Int("rounds", 3, "interleaved rounds per comparison")
	msgs       = flag.Int("msgs", 200000, "messages per drain (≥ 200,000 so that start-up does not dominate)")
	dur        = flag.Duration("duration", 2*time.Second, "measuring time of a throughput case")
	outPath    = flag.String("out", "", "also write the markdown table here")
	only       = flag.String("only", "", "comma-separated comparisons to run (drain-pg, drain-mariadb, enqueue, stream, stream-idle, latency, latency-mariadb, snowflake, election, election-mariadb, waiters, waiters-mariadb, waiters-pgbouncer, waiters-etcd); default all")
	rates      = flag.String("rates", "100,1000,10000", "offered rates (msgs/s) of the latency comparisons")
	casesFlag  = flag.String("cases", "", "latency comparisons: run only the systems whose name contains one of these comma-separated words")
	wmPoll     = flag.Duration("watermill-poll", time.Millisecond, "watermill-sql's PollInterval in the latency comparison")
	sleepBelow = flag.Int("sleep-below", 0, "the polling relays' RelayOptions.SleepBelow (0: its default)")
	pollBusy   = flag.Duration("poll-busy", 0, "the polling relays' RelayOptions.PollBusy (0: its default)")
	keepRows   = flag.Bool("keep-rows", false, "stream and latency comparisons: relays keep published rows (marked published) instead of deleting them")
)

// row is one comparison's result.
type row struct {
	name, unit   string
	ours, theirs []float64 // per round
	peer         string
	dups         [2]int64 // deliveries beyond the first of a message, ours and the peer's, all rounds
	// absolute: both sides' medians, no ratio (figures near zero, where a
	// ratio says nothing: an observer's delay)
	absolute bool
}

// unique counts deliveries by message id: a drain ends when every message
// was delivered once; deliveries of a message already delivered (a batch
// rolled back after publishing) are counted apart, never as throughput.
type unique struct {
	mu   sync.Mutex
	seen map[string]struct{}
	want int
	dups int64
	all  chan struct{}
}

func newUnique(want int) *unique {
	return &unique{seen: make(map[string]struct{}, want), want: want, all: make(chan struct{})}
}

func (u *unique) add(id string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if _, ok := u.seen[id]; ok {
		u.dups++
		return
	}
	u.seen[id] = struct{}{}
	if len(u.seen) == u.want {
		close(u.all)
	}
}

func (u *unique) count() (int, int64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.seen), u.dups
}

// recordDups makes the duplicates delivered so far the drain's (lastDups).
func (u *unique) recordDups() {
	_, d := u.count()
	lastDups.Store(d)
}

// wait returns when every message was delivered, or an error naming what
// after timeout.
func (u *unique) wait(what string, timeout time.Duration) error {
	select {
	case <-u.all:
		return nil
	case <-time.After(timeout):
		got, _ := u.count()
		return fmt.Errorf("%s: %d of %d after %v", what, got, u.want, timeout)
	}
}

// lastDups is the duplicates of the last drain of each side (set by the
// drain functions, read by compareDrain).
var lastDups atomic.Int64

// settings lists each server's durability settings, for the table.
var settings []string

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

func (r row) ratios() []float64 {
	var out []float64
	for i := range r.ours {
		if i < len(r.theirs) && r.theirs[i] > 0 {
			out = append(out, r.ours[i]/r.theirs[i])
		}
	}
	return out
}

// compare runs ours and theirs rounds times, alternating which goes first.
func compare(name, unit, peer string, ours, theirs func() (float64, error)) row {
	r := row{name: name, unit: unit, peer: peer}
	for i := 0; i < *rounds; i++ {
		var a, b float64
		var err error
		var roundDups [2]int64
		runOurs := func() (float64, error) {
			lastDups.Store(0)
			v, err := ours()
			roundDups[0] = lastDups.Load()
			return v, err
		}
		runTheirs := func() (float64, error) {
			lastDups.Store(0)
			v, err := theirs()
			roundDups[1] = lastDups.Load()
			return v, err
		}
		if i%2 == 0 {
			if a, err = runOurs(); err == nil {
				b, err = runTheirs()
			}
		} else {
			if b, err = runTheirs(); err == nil {
				a, err = runOurs()
			}
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "peers: %s round %d: %v\n", name, i+1, err)
			continue
		}
		r.ours, r.theirs = append(r.ours, a), append(r.theirs, b)
		r.dups[0], r.dups[1] = r.dups[0]+roundDups[0], r.dups[1]+roundDups[1]
		fmt.Printf("  %-58s round %d: sqlcoord %10s  %s %10s  (%s)\n", name, i+1, num(a), peer, num(b), unit)
	}
	return r
}

func main() {
	switch os.Getenv("PEERS_ROLE") {
	case "candidate": // a process of the election comparison
		candidateMain()
		return
	case "waiter": // a process of the waiters at scale
		waiterMain()
		return
	}
	flag.Parse()
	ctx := context.Background()
	// fsync on: the cost of a commit is part of what is compared.
	if os.Getenv("SQLCOORD_PG_ARGS") == "" {
		os.Setenv("SQLCOORD_PG_ARGS", "-c fsync=on -c synchronous_commit=on -c full_page_writes=on")
	}
	if os.Getenv("SQLCOORD_MYSQL_ARGS") == "" {
		os.Setenv("SQLCOORD_MYSQL_ARGS", "--innodb-flush-log-at-trx-commit=1")
	}
	want := func(name string) bool { return *only == "" || strings.Contains(","+*only+",", ","+name+",") }
	var rows []row
	var extra string // the latency tables (distributions, not ratios)
	if want("drain-pg") || want("enqueue") || want("stream") || want("stream-idle") || want("latency") {
		pg, err := localdb.Start(ctx, "postgres")
		if err != nil {
			fail(err)
		}
		defer pg.Stop()
		dsn, err := pg.CreateDatabase(ctx, "peers")
		if err != nil {
			fail(err)
		}
		db := open(ctx, dsn)
		pool, err := pgxpool.New(ctx, pgxDSN(dsn))
		if err != nil {
			fail(err)
		}
		defer pool.Close()
		if want("drain-pg") {
			rows = append(rows, drainPG(ctx, db, pool)...)
		}
		if want("enqueue") {
			rows = append(rows, enqueue(ctx, db, wsql.DefaultPostgreSQLSchema{})...)
		}
		if want("stream") {
			riverMigrate(ctx, pool)
			rows = append(rows, streamRows(ctx, db, dsn, func() (float64, error) { return riverDrain(ctx, pool, 1) })...)
		}
		if want("stream-idle") {
			rows = append(rows, idleRows(ctx, db, dsn, 30*time.Second)...)
		}
		if want("latency") {
			riverMigrate(ctx, pool)
			extra += pgLatency(ctx, db, dsn, pool)
		}
	}
	if want("drain-mariadb") || want("enqueue") || want("latency-mariadb") {
		my, err := localdb.Start(ctx, "mysql")
		if err != nil {
			fail(err)
		}
		defer my.Stop()
		dsn, err := my.CreateDatabase(ctx, "peers")
		if err != nil {
			fail(err)
		}
		db := open(ctx, dsn)
		if want("drain-mariadb") {
			rows = append(rows, drainMariaDB(ctx, db)...)
		}
		if want("enqueue") {
			rows = append(rows, enqueue(ctx, db, wsql.DefaultMySQLSchema{})...)
		}
		if want("latency-mariadb") {
			extra += mariaDBLatency(ctx, db, dsn)
		}
	}
	if want("snowflake") {
		rows = append(rows, snowflakes()...)
	}
	if want("election") || want("election-mariadb") {
		rows = append(rows, elections(ctx, *only != "")...)
	}
	if want("waiters") || want("waiters-mariadb") || want("waiters-pgbouncer") || want("waiters-etcd") {
		extra += waiterScale(ctx, *only != "")
	}
	md := table(rows) + extra
	fmt.Print("\n" + md)
	if *outPath != "" {
		if err := os.WriteFile(*outPath, []byte(md), 0o644); err != nil {
			fail(err)
		}
	}
}

// num prints a figure: whole numbers from 100 up, two decimals below.
func num(v float64) string {
	if v >= 100 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "peers:", err)
	os.Exit(1)
}

func open(ctx context.Context, dsn string) *sqlcoord.DB {
	db, err := sqlcoord.Open(ctx, dsn, sqlcoord.Options{MaxOpenConns: 80, MaxIdleConns: 80}) // no connection churn under bursts (pgxpool keeps its connections too)
	if err != nil {
		fail(err)
	}
	if db.Dialect().Family() == "postgres" {
		var fs, sc, fpw string
		db.QueryRowContext(ctx, `SELECT current_setting('fsync'), current_setting('synchronous_commit'), current_setting('full_page_writes')`).Scan(&fs, &sc, &fpw)
		settings = append(settings, fmt.Sprintf("PostgreSQL fsync=%s, synchronous_commit=%s, full_page_writes=%s", fs, sc, fpw))
	} else {
		var flush, binlog, sync string
		db.QueryRowContext(ctx, `SELECT @@innodb_flush_log_at_trx_commit, @@log_bin, @@sync_binlog`).Scan(&flush, &binlog, &sync)
		settings = append(settings, fmt.Sprintf("MariaDB innodb_flush_log_at_trx_commit=%s, log_bin=%s, sync_binlog=%s", flush, binlog, sync))
	}
	if err := migrate.Migrate(ctx, db, migrate.Up); err != nil {
		fail(err)
	}
	return db
}

// pgxDSN turns the harness's postgres:// DSN into one pgxpool accepts
// with 80 connections (the shared pool size of the comparison).
func pgxDSN(dsn string) string {
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	return dsn + sep + "pool_max_conns=80"
}

func table(rows []row) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Durability: %s. Drains count unique deliveries (by message id); duplicates are listed apart.\n\n", strings.Join(settings, "; "))
	if len(rows) == 0 {
		return b.String()
	}
	b.WriteString("| comparison | sqlcoord (median) | peer | peer (median) | ratio per round | median ratio | duplicates (sqlcoord / peer) |\n|---|---:|---|---:|---|---:|---:|\n")
	for _, r := range rows {
		var rs []string
		for _, x := range r.ratios() {
			rs = append(rs, fmt.Sprintf("%.2f", x))
		}
		if len(r.theirs) == 0 { // absolute figures, no peer
			fmt.Fprintf(&b, "| %s (%s) | %s | — | — | — | — | %d / — |\n", r.name, r.unit, num(median(r.ours)), r.dups[0])
			continue
		}
		if r.absolute {
			fmt.Fprintf(&b, "| %s (%s) | %s | %s | %s | — | — | %d / %d |\n", r.name, r.unit, num(median(r.ours)), r.peer, num(median(r.theirs)), r.dups[0], r.dups[1])
			continue
		}
		fmt.Fprintf(&b, "| %s (%s) | %s | %s | %s | %s | **%.2f** | %d / %d |\n", r.name, r.unit, num(median(r.ours)), r.peer, num(median(r.theirs)),
			strings.Join(rs, " / "), median(r.ratios()), r.dups[0], r.dups[1])
	}
	return b.String()
}

// --- outbox drain, PostgreSQL: sqlcoord relays vs River workers ---

type noopArgs struct{}

func (noopArgs) Kind() string { return "noop" }

type noopWorker struct {
	river.WorkerDefaults[noopArgs]
	done *unique
}

func (w *noopWorker) Work(_ context.Context, j *river.Job[noopArgs]) error {
	w.done.add(fmt.Sprint(j.ID))
	return nil
}

// riverMigrate installs River's schema (once is enough; again is a no-op).
func riverMigrate(ctx context.Context, pool *pgxpool.Pool) {
	mig, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		fail(err)
	}
	if _, err := mig.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		fail(err)
	}
}

func drainPG(ctx context.Context, db *sqlcoord.DB, pool *pgxpool.Pool) []row {
	riverMigrate(ctx, pool)
	var rows []row
	for _, n := range []int{1, 3} {
		rows = append(rows, compare(fmt.Sprintf("outbox drain PG, %d relay(s) vs %d River client(s), %d msgs, rows kept on both sides", n, n, *msgs), "msgs/s", "River",
			func() (float64, error) { return relayDrain(ctx, db, n, false) },
			func() (float64, error) { return riverDrain(ctx, pool, n) }))
	}
	for _, n := range []int{1, 3} {
		rows = append(rows, compare(fmt.Sprintf("not equal work: PG, %d relay(s) with DeleteOnPublish vs %d River client(s) keeping rows", n, n), "msgs/s", "River",
			func() (float64, error) { return relayDrain(ctx, db, n, true) },
			func() (float64, error) { return riverDrain(ctx, pool, n) }))
	}
	return rows
}

// prefill enqueues total outbox messages in transactions of 500.
func prefill(ctx context.Context, db *sqlcoord.DB, total int) error {
	ob := outbox.New(db)
	for i := 0; i < total; i += 500 {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		ms := make([]outbox.Msg, min(500, total-i))
		for j := range ms {
			ms[j] = outbox.Msg{Topic: "orders.created", Payload: []byte(`{"order":1}`)}
		}
		if err := ob.Enqueue(ctx, tx, ms...); err != nil {
			tx.Rollback()
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
	}
	return nil
}

// relayDrain prefills the outbox and times n relays (batch 1000, a no-op
// publisher) until every message was delivered once; rows are marked
// published (kept, as River and watermill-sql keep theirs) or, with del,
// deleted on publish.
func relayDrain(ctx context.Context, db *sqlcoord.DB, n int, del bool) (float64, error) {
	if err := prefill(ctx, db, *msgs); err != nil {
		return 0, err
	}
	u := newUnique(*msgs)
	pub := outbox.PublisherFunc(func(_ context.Context, m outbox.Message) error { u.add(m.UUID); return nil })
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < n; i++ {
		r, err := outbox.NewRelay(db, pub, outbox.RelayOptions{BatchSize: 1000, DeleteOnPublish: del, Logger: quiet})
		if err != nil {
			return 0, err
		}
		wg.Add(1)
		go func() { defer wg.Done(); r.Run(rctx) }()
	}
	if err := u.wait("relay drain", 10*time.Minute); err != nil {
		return 0, err
	}
	el := time.Since(start)
	cancel()
	wg.Wait()
	u.recordDups() // what the relays published until they stopped
	_, err := db.ExecContext(ctx, `DELETE FROM coord_outbox`)
	return float64(*msgs) / el.Seconds(), err
}

// riverDrain inserts the same number of no-op jobs and times n River
// clients (MaxWorkers 1000, FetchCooldown 1 ms) until every job ran.
func riverDrain(ctx context.Context, pool *pgxpool.Pool, n int) (float64, error) {
	done := newUnique(*msgs)
	workers := river.NewWorkers()
	river.AddWorker(workers, &noopWorker{done: done})
	inserter, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Logger: quiet, Workers: workers})
	if err != nil {
		return 0, err
	}
	for i := 0; i < *msgs; i += 500 {
		ps := make([]river.InsertManyParams, min(500, *msgs-i))
		for j := range ps {
			ps[j] = river.InsertManyParams{Args: noopArgs{}}
		}
		if _, err := inserter.InsertManyFast(ctx, ps); err != nil {
			return 0, err
		}
	}
	var clients []interface{ Stop(context.Context) error }
	start := time.Now()
	for i := 0; i < n; i++ {
		c, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Logger: quiet, Workers: workers,
			FetchCooldown: time.Millisecond, FetchPollInterval: 50 * time.Millisecond,
			Queues: map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 1000}}})
		if err != nil {
			return 0, err
		}
		if err := c.Start(ctx); err != nil {
			return 0, err
		}
		clients = append(clients, c)
	}
	if err := done.wait("river drain", 10*time.Minute); err != nil {
		return 0, err
	}
	el := time.Since(start)
	done.recordDups()
	for _, c := range clients {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		c.Stop(sctx)
		cancel()
	}
	_, err = pool.Exec(ctx, `TRUNCATE river_job`)
	return float64(*msgs) / el.Seconds(), err
}

// --- outbox drain, MariaDB: sqlcoord relays vs watermill-sql subscribers ---

func drainMariaDB(ctx context.Context, db *sqlcoord.DB) []row {
	var rows []row
	for _, n := range []int{1, 3} {
		rows = append(rows, compare(fmt.Sprintf("outbox drain MariaDB, %d relay(s) vs %d watermill-sql subscriber(s), %d msgs, rows kept on both sides", n, n, *msgs), "msgs/s", "watermill-sql",
			func() (float64, error) { return relayDrain(ctx, db, n, false) },
			func() (float64, error) { return watermillDrain(ctx, db, n) }))
	}
	for _, n := range []int{1, 3} {
		rows = append(rows, compare(fmt.Sprintf("not equal work: MariaDB, %d relay(s) with DeleteOnPublish vs %d watermill-sql subscriber(s) keeping rows", n, n), "msgs/s", "watermill-sql",
			func() (float64, error) { return relayDrain(ctx, db, n, true) },
			func() (float64, error) { return watermillDrain(ctx, db, n) }))
	}
	return rows
}

var wmTopic atomic.Int64

// watermillDrain publishes the messages (500 per transaction) and times n
// subscribers of one consumer group (PollInterval 50 ms) until every
// message was acknowledged.
func watermillDrain(ctx context.Context, db *sqlcoord.DB, n int) (float64, error) {
	topic := fmt.Sprintf("orders_%d", wmTopic.Add(1)) // a table per topic: fresh each round
	logger := watermill.NopLogger{}
	for i := 0; i < *msgs; i += 500 {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return 0, err
		}
		if i == 0 {
			if err := initTopic(db, wsql.DefaultMySQLSchema{}, topic); err != nil {
				tx.Rollback()
				return 0, err
			}
		}
		p, err := wsql.NewPublisher(wsql.TxFromStdSQL(tx), wsql.PublisherConfig{SchemaAdapter: wsql.DefaultMySQLSchema{}}, logger)
		if err != nil {
			tx.Rollback()
			return 0, err
		}
		ms := make([]*message.Message, min(500, *msgs-i))
		for j := range ms {
			ms[j] = message.NewMessage(watermill.NewUUID(), []byte(`{"order":1}`))
		}
		if err := p.Publish(topic, ms...); err != nil {
			tx.Rollback()
			return 0, err
		}
		if err := tx.Commit(); err != nil {
			return 0, err
		}
	}
	done := newUnique(*msgs + 1) // + initTopic's message
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	for i := 0; i < n; i++ {
		s, err := wsql.NewSubscriber(wsql.BeginnerFromStdSQL(db.DB), wsql.SubscriberConfig{ConsumerGroup: "bench",
			SchemaAdapter: wsql.DefaultMySQLSchema{}, OffsetsAdapter: wsql.DefaultMySQLOffsetsAdapter{}, InitializeSchema: true,
			PollInterval: 50 * time.Millisecond}, logger)
		if err != nil {
			return 0, err
		}
		defer s.Close()
		ch, err := s.Subscribe(rctx, topic)
		if err != nil {
			return 0, err
		}
		go func() {
			for m := range ch {
				done.add(m.UUID)
				m.Ack()
			}
		}()
	}
	if err := done.wait("watermill drain", 10*time.Minute); err != nil {
		return 0, err
	}
	el := time.Since(start)
	done.recordDups()
	return float64(*msgs) / el.Seconds(), nil
}

// initTopic creates watermill's table of a topic (its publisher refuses to
// do so inside a transaction).
func initTopic(db *sqlcoord.DB, schema wsql.SchemaAdapter, topic string) error {
	p, err := wsql.NewPublisher(wsql.BeginnerFromStdSQL(db.DB), wsql.PublisherConfig{SchemaAdapter: schema, AutoInitializeSchema: true}, watermill.NopLogger{})
	if err != nil {
		return err
	}
	return p.Publish(topic, message.NewMessage(watermill.NewUUID(), []byte("{}")))
}

// --- Enqueue in the business transaction vs watermill-sql publish in it ---

func enqueue(ctx context.Context, db *sqlcoord.DB, schema wsql.SchemaAdapter) []row {
	create := `CREATE TABLE IF NOT EXISTS bench_orders (id bigserial PRIMARY KEY, body text NOT NULL)`
	insert := `INSERT INTO bench_orders (body) VALUES ($1)`
	if db.Dialect().Family() != "postgres" {
		create = `CREATE TABLE IF NOT EXISTS bench_orders (id BIGINT AUTO_INCREMENT PRIMARY KEY, body TEXT NOT NULL)`
		insert = `INSERT INTO bench_orders (body) VALUES (?)`
	}
	if _, err := db.ExecContext(ctx, create); err != nil {
		fail(err)
	}
	ob := outbox.New(db)
	logger := watermill.NopLogger{}
	// initialise watermill's topic table once (outside a transaction)
	if err := initTopic(db, schema, "orders_tx"); err != nil {
		fail(err)
	}
	business := func(ctx context.Context, extra func(tx *sql.Tx) error) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, insert, `{"order":1}`); err != nil {
			tx.Rollback()
			return err
		}
		if extra != nil {
			if err := extra(tx); err != nil {
				tx.Rollback()
				return err
			}
		}
		return tx.Commit()
	}
	bare := func(producers int) float64 {
		return rate(ctx, producers, func(ctx context.Context) error { return business(ctx, nil) })
	}
	var rows []row
	for _, producers := range []int{1, 8} {
		rows = append(rows, compare(fmt.Sprintf("enqueue in the business tx, %s, %d producer(s), ÷ bare tx", db.Dialect().Name(), producers), "× bare tx", "watermill-sql publish in tx",
			func() (float64, error) {
				b := bare(producers)
				e := rate(ctx, producers, func(ctx context.Context) error {
					return business(ctx, func(tx *sql.Tx) error {
						return ob.Enqueue(ctx, tx, outbox.Msg{Topic: "orders.created", Payload: []byte(`{"order":1}`)})
					})
				})
				return e / b, nil
			},
			func() (float64, error) {
				b := bare(producers)
				w := rate(ctx, producers, func(ctx context.Context) error {
					return business(ctx, func(tx *sql.Tx) error {
						p, err := wsql.NewPublisher(wsql.TxFromStdSQL(tx), wsql.PublisherConfig{SchemaAdapter: schema}, logger)
						if err != nil {
							return err
						}
						return p.Publish("orders_tx", message.NewMessage(watermill.NewUUID(), []byte(`{"order":1}`)))
					})
				})
				return w / b, nil
			}))
	}
	return rows
}

// rate runs op from producers goroutines for the measuring time: ops/s.
func rate(ctx context.Context, producers int, op func(context.Context) error) float64 {
	var n atomic.Int64
	stop := time.Now().Add(*dur)
	var wg sync.WaitGroup
	for i := 0; i < producers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				if op(ctx) == nil {
					n.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return float64(n.Load()) / dur.Seconds()
}

// --- snowflake ids: sqlcoord vs bwmarrin/snowflake, ids per second ---

func snowflakes() []row {
	var rows []row
	const perG = 1_000_000
	for _, g := range []int{1, 8} {
		rows = append(rows, compare(fmt.Sprintf("snowflake ids, %d goroutine(s) × %d", g, perG), "M ids/s (cap 4.096)", "bwmarrin/snowflake",
			func() (float64, error) {
				s, err := ids.NewSnowflake(1, 0, ids.SnowflakeOptions{})
				if err != nil {
					return 0, err
				}
				return idRate(g, perG, func() error { _, err := s.Next(); return err })
			},
			func() (float64, error) {
				node, err := snowflake.NewNode(1)
				if err != nil {
					return 0, err
				}
				return idRate(g, perG, func() error { node.Generate(); return nil })
			}))
	}
	return rows
}

func idRate(g, per int, next func() error) (float64, error) {
	var wg sync.WaitGroup
	var firstErr atomic.Value
	start := time.Now()
	for i := 0; i < g; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < per; j++ {
				if err := next(); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return 0, err
	}
	return float64(g*per) / time.Since(start).Seconds() / 1e6, nil
}
