package main

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/sqlcoord/sqlcoord"
)

// --- commit→delivery against the peers ---
//
// Every system gets the same producers (32 goroutines, one message per
// transaction, paced to the offered rate) and the same clock: from the
// producer's Commit returning to the consumer seeing the message. Each
// cell is a distribution over every message of every round.

// latArgs is the River job of the latency runs: the message id.
type latArgs struct {
	ID string `json:"id"`
}

func (latArgs) Kind() string { return "latency" }

type latWorker struct {
	river.WorkerDefaults[latArgs]
	deliver func(string)
}

func (w *latWorker) Work(_ context.Context, j *river.Job[latArgs]) error {
	w.deliver(j.Args.ID)
	return nil
}

// riverSystem: n River clients (MaxWorkers 100, FetchCooldown 1 ms — its
// minimum — and FetchPollInterval 50 ms; River wakes on its own LISTEN/NOTIFY),
// producers InsertTx in a pgx transaction of their own.
func riverSystem(ctx context.Context, pool *pgxpool.Pool, n int) latencySystem {
	var deliverTo func(string)
	workers := river.NewWorkers()
	river.AddWorker(workers, &latWorker{deliver: func(id string) { deliverTo(id) }})
	// the inserter notifies at most once per its FetchCooldown: 1 ms, as
	// the workers' clients
	inserter, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Logger: quiet, Workers: workers, FetchCooldown: time.Millisecond})
	if err != nil {
		fail(err)
	}
	return latencySystem{
		start: func(ctx context.Context, deliver func(string)) (func(), error) {
			deliverTo = deliver
			var clients []*river.Client[pgx.Tx]
			stop := func() {
				for _, c := range clients {
					sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
					c.Stop(sctx)
					cancel()
				}
			}
			for range n {
				c, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Logger: quiet, Workers: workers,
					FetchCooldown: time.Millisecond, FetchPollInterval: 50 * time.Millisecond,
					Queues: map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 100}}})
				if err != nil {
					stop()
					return nil, err
				}
				if err := c.Start(ctx); err != nil {
					stop()
					return nil, err
				}
				clients = append(clients, c)
			}
			time.Sleep(time.Second) // elected, listening
			return stop, nil
		},
		produce: func(ctx context.Context, id string) error {
			tx, err := pool.Begin(ctx)
			if err != nil {
				return err
			}
			defer tx.Rollback(context.WithoutCancel(ctx))
			if _, err := inserter.InsertTx(ctx, tx, latArgs{ID: id}, nil); err != nil {
				return err
			}
			return tx.Commit(ctx)
		},
		clear: func() { pool.Exec(ctx, `TRUNCATE river_job`) },
	}
}

// watermillSystem: n watermill-sql subscribers of one consumer group on a
// fresh topic, PollInterval poll; producers Publish in a transaction of
// their own.
func watermillSystem(ctx context.Context, db *sqlcoord.DB, n int, poll time.Duration) latencySystem {
	topic := fmt.Sprintf("lat_%d", wmTopic.Add(1))
	var schema wsql.SchemaAdapter = wsql.DefaultMySQLSchema{}
	var offsets wsql.OffsetsAdapter = wsql.DefaultMySQLOffsetsAdapter{}
	if db.Dialect().Family() == "postgres" {
		schema, offsets = wsql.DefaultPostgreSQLSchema{}, wsql.DefaultPostgreSQLOffsetsAdapter{}
	}
	if err := initTopic(db, schema, topic); err != nil {
		fail(err)
	}
	logger := watermill.NopLogger{}
	return latencySystem{
		start: func(ctx context.Context, deliver func(string)) (func(), error) {
			rctx, cancel := context.WithCancel(ctx)
			var subs []*wsql.Subscriber
			stop := func() {
				cancel()
				for _, s := range subs {
					s.Close()
				}
			}
			for range n {
				s, err := wsql.NewSubscriber(wsql.BeginnerFromStdSQL(db.DB), wsql.SubscriberConfig{ConsumerGroup: "lat",
					SchemaAdapter: schema, OffsetsAdapter: offsets, InitializeSchema: true,
					PollInterval: poll}, logger)
				if err != nil {
					stop()
					return nil, err
				}
				subs = append(subs, s)
				ch, err := s.Subscribe(rctx, topic)
				if err != nil {
					stop()
					return nil, err
				}
				go func() {
					for m := range ch {
						deliver(m.UUID)
						m.Ack()
					}
				}()
			}
			time.Sleep(time.Second)
			return stop, nil
		},
		produce: func(ctx context.Context, id string) error {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			defer tx.Rollback()
			p, err := wsql.NewPublisher(wsql.TxFromStdSQL(tx), wsql.PublisherConfig{SchemaAdapter: schema}, logger)
			if err != nil {
				return err
			}
			if err := p.Publish(topic, message.NewMessage(id, []byte(`{"order":1}`))); err != nil {
				return err
			}
			return tx.Commit()
		},
		clear: func() {},
	}
}

// latencyCase is one system of a latency comparison.
type latencyCase struct {
	name string
	sys  func() latencySystem
}

// latencyTable runs every case at every offered rate, *rounds rounds with
// the order rotated each round, and prints one line per case and rate:
// the distribution over all rounds' messages and the per-round p50s.
func latencyTable(ctx context.Context, title string, all []latencyCase, rates []int) string {
	var cases []latencyCase
	for _, c := range all {
		keep := *casesFlag == ""
		for _, w := range strings.Split(*casesFlag, ",") {
			keep = keep || (w != "" && strings.Contains(c.name, w))
		}
		if keep {
			cases = append(cases, c)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n%s\n\n| offered (msgs/s) | system | messages | lost | p50 | p90 | p99 | p99.9 | max | p50 per round | achieved (msgs/s) | producer tx p50 |\n|---:|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|\n", title)
	ms := func(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d.Microseconds())/1000) }
	for _, rate := range rates {
		lats := make([][]time.Duration, len(cases))
		p50s := make([][]string, len(cases))
		ach := make([]float64, len(cases))
		lost := make([]int, len(cases))
		tx := make([]time.Duration, len(cases))
		for i := 0; i < *rounds; i++ {
			for k := range cases {
				j := (k + i) % len(cases)
				c := cases[j]
				r, lat, err := runLatency(ctx, c.sys(), c.name, rate, *dur*3)
				if err != nil {
					fmt.Fprintf(os.Stderr, "peers: latency %s at %d/s round %d: %v\n", c.name, rate, i+1, err)
					continue
				}
				lats[j] = append(lats[j], lat...)
				lost[j] += r.lost
				p50s[j] = append(p50s[j], ms(r.p50))
				ach[j] += r.rate / float64(*rounds)
				tx[j] = r.txP50
				fmt.Printf("  %-34s at %5d/s: p50 %6.2f p90 %6.2f p99 %6.2f ms (%d msgs, %d lost, %.0f/s, producer tx p50 %v)\n",
					c.name, rate, float64(r.p50.Microseconds())/1000, float64(r.p90.Microseconds())/1000, float64(r.p99.Microseconds())/1000, r.n, r.lost, r.rate, r.txP50.Round(10*time.Microsecond))
			}
		}
		for j, c := range cases {
			d := dist(lats[j])
			fmt.Fprintf(&b, "| %d | %s | %d | %d | %s | %s | %s | %s | %s | %s | %.0f | %s |\n", rate, c.name, d.n, lost[j],
				ms(d.p50), ms(d.p90), ms(d.p99), ms(d.p999), ms(d.max), strings.Join(p50s[j], " / "), ach[j], ms(tx[j]))
		}
	}
	return b.String()
}

// dist is the distribution of lat (sorted here).
func dist(lat []time.Duration) latencyRun {
	var out latencyRun
	if len(lat) == 0 {
		return out
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	q := func(f float64) time.Duration { return lat[min(len(lat)-1, int(float64(len(lat))*f))] }
	out.p50, out.p90, out.p99, out.p999, out.max, out.n = q(0.5), q(0.9), q(0.99), q(0.999), lat[len(lat)-1], len(lat)
	return out
}

// offeredRates parses -rates.
func offeredRates() []int {
	var out []int
	for _, f := range strings.Split(*rates, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			fail(fmt.Errorf("-rates: %q is not a positive rate", f))
		}
		out = append(out, n)
	}
	return out
}

// pgLatency: sqlcoord's polling relay (LISTEN on, the default) and its
// streaming relay beside River and watermill-sql, 1 and 3 consumers.
func pgLatency(ctx context.Context, db *sqlcoord.DB, dsn string, pool *pgxpool.Pool) string {
	relayDB := openRelayDB(ctx, dsn)
	defer relayDB.Close()
	cases := []latencyCase{
		{"sqlcoord, 1 polling relay", func() latencySystem { return relaySystem(ctx, db, relayDB, polling, 1) }},
		{"sqlcoord, 3 polling relays", func() latencySystem { return relaySystem(ctx, db, relayDB, polling, 3) }},
		{"sqlcoord, 1 streaming relay", func() latencySystem { return relaySystem(ctx, db, relayDB, streaming, 1) }},
		{"River, 1 client", func() latencySystem { return riverSystem(ctx, pool, 1) }},
		{"River, 3 clients", func() latencySystem { return riverSystem(ctx, pool, 3) }},
		{fmt.Sprintf("watermill-sql, 1 subscriber (poll %v)", *wmPoll), func() latencySystem { return watermillSystem(ctx, db, 1, *wmPoll) }},
		{fmt.Sprintf("watermill-sql, 3 subscribers (poll %v)", *wmPoll), func() latencySystem { return watermillSystem(ctx, db, 3, *wmPoll) }},
	}
	return latencyTable(ctx, "PostgreSQL commit→delivery (ms; 32 producers, one message per transaction)", cases, offeredRates())
}

// mariaDBLatency: sqlcoord's polling relay beside watermill-sql, 1 and 3
// consumers.
func mariaDBLatency(ctx context.Context, db *sqlcoord.DB, dsn string) string {
	relayDB, err := sqlcoord.Open(ctx, dsn, sqlcoord.Options{MaxOpenConns: 8, MaxIdleConns: 8})
	if err != nil {
		fail(err)
	}
	defer relayDB.Close()
	cases := []latencyCase{
		{"sqlcoord, 1 polling relay", func() latencySystem { return relaySystem(ctx, db, relayDB, polling, 1) }},
		{"sqlcoord, 3 polling relays", func() latencySystem { return relaySystem(ctx, db, relayDB, polling, 3) }},
		{fmt.Sprintf("watermill-sql, 1 subscriber (poll %v)", *wmPoll), func() latencySystem { return watermillSystem(ctx, db, 1, *wmPoll) }},
		{fmt.Sprintf("watermill-sql, 3 subscribers (poll %v)", *wmPoll), func() latencySystem { return watermillSystem(ctx, db, 3, *wmPoll) }},
	}
	return latencyTable(ctx, "MariaDB commit→delivery (ms; 32 producers, one message per transaction)", cases, offeredRates())
}
