// Package bench measures sqlcoord's primitives against the database's own
// mechanisms in the same run, so results are ratios on one noisy machine
// rather than absolute claims. It uses only the public API.
package bench

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sqlcoord/sqlcoord"
)

// Result is one measured case.
type Result struct {
	Dialect  string        `json:"dialect"`
	Group    string        `json:"group"`
	Case     string        `json:"case"`
	Clients  int           `json:"clients"`
	Ops      int64         `json:"ops"`
	Errors   int64         `json:"errors"`
	Elapsed  time.Duration `json:"elapsed_ns"`
	OpsPerS  float64       `json:"ops_per_s"`
	P50      time.Duration `json:"p50_ns"`
	P99      time.Duration `json:"p99_ns"`
	Baseline string        `json:"baseline,omitempty"` // case this one is compared with
	Ratio    float64       `json:"ratio,omitempty"`    // OpsPerS / baseline's OpsPerS
	// Over several rounds (Median): the rounds, and the lowest and highest
	// of the ratios measured within each round.
	Rounds   int     `json:"rounds,omitempty"`
	RatioMin float64 `json:"ratio_min,omitempty"`
	RatioMax float64 `json:"ratio_max,omitempty"`
	// The server's log per operation, server-wide (run on a server of its
	// own): PostgreSQL's WAL records, bytes and syncs (pg_stat_wal; syncs
	// are fsync calls, 0 with fsync=off); MariaDB/MySQL's redo log bytes
	// and fsyncs (Innodb_os_log_written; Innodb_os_log_fsyncs, or on
	// MariaDB ≥ 10.8 Innodb_data_fsyncs; no record count).
	WALRecords float64 `json:"wal_records_per_op,omitempty"`
	WALBytes   float64 `json:"wal_bytes_per_op,omitempty"`
	WALSyncs   float64 `json:"wal_syncs_per_op,omitempty"`
	// Statements the server executed per operation — round trips, BEGIN
	// and COMMIT included (PostgreSQL: pg_stat_statements when installed;
	// MySQL family: the global Questions counter). 0: not measured.
	Statements float64 `json:"statements_per_op,omitempty"`
	// Pages read from disk per operation, where a case measured them
	// (PostgreSQL: blocks not found in shared_buffers, which the OS cache
	// may still hold; MariaDB: Innodb_buffer_pool_reads, from disk — the
	// throwaway servers use O_DIRECT). nil: not measured.
	DiskReads *float64 `json:"disk_reads_per_op,omitempty"`
	// lat: every operation's latency, sorted, until the suite merges
	// slices (see suite.interleaved); not kept in results.
	lat []time.Duration
}

// Op is one operation of client number worker.
type Op func(ctx context.Context, worker int) error

// Measure runs op from clients goroutines for d and records throughput and
// latency percentiles. A failing op counts as an error, not as a sample.
func Measure(ctx context.Context, clients int, d time.Duration, op Op) Result {
	deadline := time.Now().Add(d)
	return measure(ctx, clients, func() (time.Time, bool) {
		now := time.Now()
		return now, now.Before(deadline) && ctx.Err() == nil
	}, op)
}

// MeasureRate offers op at rate operations per second in all (open loop),
// taken by clients goroutines: one is due every 1/rate, whichever client
// is free starts it, and its latency counts from when it was due, so a
// server that falls behind shows as a lower rate achieved and a higher
// p99 rather than as a slower offer. Operations still waiting at the end
// are not started.
func MeasureRate(ctx context.Context, clients int, d time.Duration, rate float64, op Op) Result {
	every := max(time.Duration(float64(time.Second)/rate), time.Nanosecond)
	start := time.Now()
	deadline := start.Add(d)
	// the offer does not wait for the clients (up to a million behind)
	due := make(chan time.Time, min(int(d/every)+1, 1<<20))
	go func() {
		defer close(due)
		for t := start; t.Before(deadline) && ctx.Err() == nil; t = t.Add(every) {
			time.Sleep(time.Until(t))
			due <- t
		}
	}()
	return measure(ctx, clients, func() (time.Time, bool) {
		for t := range due {
			if time.Now().Before(deadline) && ctx.Err() == nil {
				return t, true
			} // else drain what is left unstarted
		}
		return time.Time{}, false
	}, op)
}

// measure runs op from clients goroutines, each asking next for the time
// its next operation was due (false: stop); latency counts from then.
func measure(ctx context.Context, clients int, next func() (time.Time, bool), op Op) Result {
	var mu sync.Mutex
	var lat []time.Duration
	var errs int64
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < clients; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			local := make([]time.Duration, 0, 1024)
			var le int64
			for t, ok := next(); ok; t, ok = next() {
				if err := op(ctx, w); err != nil {
					le++
					continue
				}
				local = append(local, time.Since(t))
			}
			mu.Lock()
			lat = append(lat, local...)
			errs += le
			mu.Unlock()
		}()
	}
	wg.Wait()
	return summary(clients, lat, errs, time.Since(start))
}

func summary(clients int, lat []time.Duration, errs int64, el time.Duration) Result {
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	r := Result{Clients: clients, Ops: int64(len(lat)), Errors: errs, Elapsed: el, lat: lat}
	r.OpsPerS = float64(len(lat)) / el.Seconds()
	if len(lat) > 0 {
		r.P50 = lat[len(lat)/2]
		r.P99 = lat[len(lat)*99/100]
	}
	return r
}

// Config is shared by the primitive benchmarks.
type Config struct {
	Duration time.Duration // per case; default 2s
	Clients  []int         // default 1, 8, 32
	Progress io.Writer     // optional: one line per case
	// Rate, when positive, offers the cases that support it this many
	// operations per second in all (MeasureRate) instead of a closed loop.
	Rate float64
	// Slices, when above 1, measures the cases a group compares with
	// each other (locks, idempotency) in that many slices of
	// Duration/Slices, taking turns: the cases in their order in one
	// slice, in reverse in the next (A B B A …), each case's slices
	// added up. A case and its baseline then see the same moments of a
	// shared, noisy machine, instead of one after the other. Default 1:
	// each case once for Duration.
	Slices int
}

func (c *Config) defaults() {
	if c.Duration <= 0 {
		c.Duration = 2 * time.Second
	}
	if len(c.Clients) == 0 {
		c.Clients = []int{1, 8, 32}
	}
}

// suite is one group of cases on one database.
type suite struct {
	db    *sqlcoord.DB
	cfg   Config
	group string
	out   []Result
}

func (s *suite) run(ctx context.Context, name, baseline string, clients int, op Op) {
	s.add(s.slice(ctx, clients, s.cfg.Duration, op), name, baseline)
}

// slice measures op with clients for d, with the server's counters per
// operation.
func (s *suite) slice(ctx context.Context, clients int, d time.Duration, op Op) Result {
	before, walOK := s.wal(ctx)
	s.warm(ctx, clients)
	st0, stOK := s.statements(ctx)
	var r Result
	if s.cfg.Rate > 0 {
		r = MeasureRate(ctx, clients, d, s.cfg.Rate, op)
	} else {
		r = Measure(ctx, clients, d, op)
	}
	if st1, ok := s.statements(ctx); stOK && ok && r.Ops > 0 {
		r.Statements = (st1 - st0 - 1) / float64(r.Ops) // minus the counting statement itself
	}
	if after, ok := s.wal(ctx); walOK && ok && r.Ops > 0 {
		n := float64(r.Ops)
		r.WALRecords, r.WALBytes, r.WALSyncs = (after[0]-before[0])/n, (after[1]-before[1])/n, (after[2]-before[2])/n
	}
	return r
}

// benchCase is one case of a group measured by interleaved.
type benchCase struct {
	name, baseline string
	op             Op
}

// caseList gathers a group's cases for interleaved.
type caseList []benchCase

func (l *caseList) add(name, baseline string, op Op) {
	*l = append(*l, benchCase{name, baseline, op})
}

// interleaved measures cases with clients, each for Duration in all: in
// one go each (Slices ≤ 1), or in Slices slices taking turns, the order
// reversed every other slice (see Config.Slices). Cases are added in the
// order given, so a baseline listed before its case is its ratio's
// denominator.
func (s *suite) interleaved(ctx context.Context, clients int, cases caseList) {
	n := max(s.cfg.Slices, 1)
	parts := make([][]Result, len(cases))
	for i := 0; i < n; i++ {
		for j := range cases {
			k := j
			if i%2 == 1 {
				k = len(cases) - 1 - j
			}
			parts[k] = append(parts[k], s.slice(ctx, clients, s.cfg.Duration/time.Duration(n), cases[k].op))
		}
	}
	for k, c := range cases {
		s.add(merge(parts[k]), c.name, c.baseline)
	}
}

// merge adds up the slices of one case: operations, errors and time
// summed, the counters per operation weighted by each slice's operations,
// the latency percentiles of all the slices' operations.
func merge(parts []Result) Result {
	if len(parts) == 1 {
		return parts[0]
	}
	var r Result
	var lat []time.Duration
	for _, p := range parts {
		n := float64(p.Ops)
		r.Errors += p.Errors
		r.Elapsed += p.Elapsed
		r.Statements += p.Statements * n
		r.WALRecords += p.WALRecords * n
		r.WALBytes += p.WALBytes * n
		r.WALSyncs += p.WALSyncs * n
		lat = append(lat, p.lat...)
	}
	m := summary(parts[0].Clients, lat, r.Errors, r.Elapsed)
	if n := float64(m.Ops); n > 0 {
		m.Statements, m.WALRecords, m.WALBytes, m.WALSyncs = r.Statements/n, r.WALRecords/n, r.WALBytes/n, r.WALSyncs/n
	}
	return m
}

// add records r as case name of this group (its ratio to baseline's last
// result with the same clients in this round) and prints it.
func (s *suite) add(r Result, name, baseline string) {
	r.lat = nil
	r.Dialect, r.Group, r.Case, r.Baseline = s.db.Dialect().Name(), s.group, name, baseline
	r.Ratio = s.ratio(r, baseline)
	if s.cfg.Progress != nil {
		fmt.Fprintf(s.cfg.Progress, "  %-8s %-28s clients=%-3d %9.0f ops/s  p50 %-9v p99 %-9v errors %d  per op: %.2f statements, WAL %.0f B %.2f syncs\n",
			r.Dialect, name, r.Clients, r.OpsPerS, r.P50.Round(time.Microsecond), r.P99.Round(time.Microsecond), r.Errors, r.Statements, r.WALBytes, r.WALSyncs)
	}
	s.out = append(s.out, r)
}

// compare adds a row that shows the last measurement of name (same
// clients) once more, with baseline as its ratio's denominator: one
// measurement beside a second baseline of this round.
func (s *suite) compare(name, baseline string, clients int) {
	for i := len(s.out) - 1; i >= 0; i-- {
		r := s.out[i]
		if r.Case != name || r.Clients != clients {
			continue
		}
		r.Case, r.Baseline, r.Ratio = name+", beside "+baseline, baseline, s.ratio(r, baseline)
		s.out = append(s.out, r)
		return
	}
}

// ratio is r's throughput over that of the last case named baseline
// measured with r's clients in this round (0: none).
func (s *suite) ratio(r Result, baseline string) float64 {
	var ratio float64
	for _, b := range s.out {
		if b.Case == baseline && b.Clients == r.Clients && b.OpsPerS > 0 {
			ratio = r.OpsPerS / b.OpsPerS
		}
	}
	return ratio
}

// wal reads the server's log counters (see logCounters).
func (s *suite) wal(ctx context.Context) ([3]float64, bool) { return logCounters(ctx, s.db) }

// logCounters reads the server's log counters: PostgreSQL pg_stat_wal
// (records, bytes, syncs) after every connection of the pool reported
// its backend's (flushStats); MariaDB/MySQL the redo log's bytes written
// and fsyncs (records: 0).
func logCounters(ctx context.Context, db *sqlcoord.DB) ([3]float64, bool) {
	var w [3]float64
	if db.Dialect().Family() != "postgres" {
		rows, err := db.QueryContext(ctx, `SHOW GLOBAL STATUS WHERE Variable_name IN ('Innodb_os_log_written', 'Innodb_os_log_fsyncs', 'Innodb_data_fsyncs')`)
		if err != nil {
			return w, false
		}
		defer rows.Close()
		v := map[string]float64{}
		for rows.Next() {
			var name string
			var n float64
			if rows.Scan(&name, &n) != nil {
				return w, false
			}
			v[name] = n
		}
		// MariaDB ≥ 10.8 has no Innodb_os_log_fsyncs: its data fsyncs
		// (redo and data files) stand in.
		syncs, ok := v["Innodb_os_log_fsyncs"]
		if !ok {
			syncs, ok = v["Innodb_data_fsyncs"]
		}
		bytes, ok2 := v["Innodb_os_log_written"]
		w[1], w[2] = bytes, syncs
		return w, rows.Err() == nil && ok && ok2
	}
	flushStats(ctx, db)
	err := db.QueryRowContext(ctx, `SELECT wal_records::float8, wal_bytes::float8, wal_sync::float8 FROM pg_stat_wal`).Scan(&w[0], &w[1], &w[2])
	return w, err == nil
}

// poolSize lets db's pool open n connections and keep them all between
// operations. SetMaxOpenConns alone would not: lowering it (a case with
// fewer clients) lowers the idle limit too, and raising it again leaves
// that limit low — the next case with more clients would close and reopen
// connections all along, and measure that.
func poolSize(db *sqlcoord.DB, n int) {
	db.SetMaxOpenConns(n)
	db.SetMaxIdleConns(n)
}

// flushStats has every connection of the pool report its backend's
// statistics (WAL, blocks read), which a backend otherwise sends at most
// once a second, or as it exits: pg_stat_force_next_flush (PostgreSQL
// 15+) on each, so the connections — and the statements their backends
// planned — stay for the next case. Older servers: the idle connections
// are closed (their backends report as they exit).
func flushStats(ctx context.Context, db *sqlcoord.DB) {
	n := db.Stats().OpenConnections
	conns := make([]*sql.Conn, 0, n)
	flushed := true
	for range n {
		c, err := db.Conn(ctx)
		if err != nil {
			break
		}
		conns = append(conns, c)
		if _, err := c.ExecContext(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
			flushed = false
			break
		}
	}
	for _, c := range conns {
		c.Close()
	}
	if !flushed {
		db.SetMaxIdleConns(0)
		db.SetMaxIdleConns(max(db.Stats().MaxOpenConnections, 64))
		time.Sleep(100 * time.Millisecond) // the backends' exits
	}
}

// warm opens the case's connections before it is timed (a case before
// it may have used fewer; on servers before PostgreSQL 15 reading the WAL
// statistics closed every idle one): a case does not measure its pool's
// start, which an offered rate would otherwise queue behind.
func (s *suite) warm(ctx context.Context, clients int) {
	conns := make([]*sql.Conn, 0, clients)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := 0; i < clients; i++ {
		c, err := s.db.Conn(ctx)
		if err != nil {
			return
		}
		conns = append(conns, c)
	}
}

// statements reads the server's count of executed statements.
func (s *suite) statements(ctx context.Context) (float64, bool) {
	var n float64
	if s.db.Dialect().Family() == "postgres" {
		err := s.db.QueryRowContext(ctx, `SELECT COALESCE(sum(calls), 0)::float8 FROM pg_stat_statements`).Scan(&n)
		return n, err == nil
	}
	var name string
	err := s.db.QueryRowContext(ctx, `SHOW GLOBAL STATUS LIKE 'Questions'`).Scan(&name, &n)
	return n, err == nil
}

// Markdown renders results as a table.
func Markdown(rs []Result) string {
	var b strings.Builder
	reads := false
	for _, r := range rs {
		reads = reads || r.DiskReads != nil
	}
	b.WriteString("| dialect | group | case | clients | ops/s | p50 | p99 | vs baseline | statements/op | WAL/redo bytes/op | WAL/redo syncs/op | errors |")
	if reads {
		b.WriteString(" pages read/op |")
	}
	b.WriteString("\n|---|---|---|---:|---:|---:|---:|---|---:|---:|---:|---:|")
	if reads {
		b.WriteString("---:|")
	}
	b.WriteString("\n")
	for _, r := range rs {
		ratio := ""
		if r.Baseline != "" && r.Ratio > 0 {
			ratio = fmt.Sprintf("%.2f× %s", r.Ratio, r.Baseline)
			if r.Rounds > 1 {
				ratio = fmt.Sprintf("%.2f× (%.2f–%.2f in %d rounds) %s", r.Ratio, r.RatioMin, r.RatioMax, r.Rounds, r.Baseline)
			}
		}
		walB, walS := "", ""
		if r.WALBytes > 0 || r.WALSyncs > 0 {
			walB, walS = fmt.Sprintf("%.0f", r.WALBytes), fmt.Sprintf("%.2f", r.WALSyncs)
		}
		stmts := ""
		if r.Statements > 0 {
			stmts = fmt.Sprintf("%.2f", r.Statements)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %d | %.0f | %v | %v | %s | %s | %s | %s | %d |", r.Dialect, r.Group, r.Case, r.Clients,
			r.OpsPerS, r.P50.Round(time.Microsecond), r.P99.Round(time.Microsecond), ratio, stmts, walB, walS, r.Errors)
		if reads && r.DiskReads != nil {
			fmt.Fprintf(&b, " %.1f |", *r.DiskReads)
		} else if reads {
			b.WriteString(" |")
		}
		b.WriteString("\n")
	}
	return b.String()
}

// Median folds the results of several rounds of the same cases into one
// row per case: the round with the median throughput, and as its ratio the
// median of the ratios measured within each round (a case and its
// baseline ran seconds apart, so a noisy neighbour moves both), with their
// range.
func Median(rounds [][]Result) []Result {
	if len(rounds) == 0 {
		return nil
	}
	type key struct {
		d, g, c string
		n       int
	}
	byKey := map[key][]Result{}
	for _, rs := range rounds {
		for _, r := range rs {
			k := key{r.Dialect, r.Group, r.Case, r.Clients}
			byKey[k] = append(byKey[k], r)
		}
	}
	var out []Result
	for _, r := range rounds[0] {
		all := byKey[key{r.Dialect, r.Group, r.Case, r.Clients}]
		sort.Slice(all, func(i, j int) bool { return all[i].OpsPerS < all[j].OpsPerS })
		m := all[len(all)/2]
		var ratios []float64
		for _, x := range all {
			if x.Ratio > 0 {
				ratios = append(ratios, x.Ratio)
			}
		}
		m.Rounds, m.Ratio = len(all), 0
		if len(ratios) > 0 {
			sort.Float64s(ratios)
			m.Ratio, m.RatioMin, m.RatioMax = ratios[len(ratios)/2], ratios[0], ratios[len(ratios)-1]
		}
		out = append(out, m)
	}
	return out
}

// ServerSettings describes what the figures depend on: the server's
// version and durability settings, prefixed with the dialect's name.
func ServerSettings(ctx context.Context, db *sqlcoord.DB) string {
	names := []string{"server_version", "fsync", "synchronous_commit", "full_page_writes", "shared_buffers"}
	q := func(name string) string { return "SELECT current_setting('" + name + "')" }
	if db.Dialect().Family() != "postgres" {
		names = []string{"version", "innodb_flush_log_at_trx_commit", "innodb_buffer_pool_size", "innodb_flush_method", "innodb_change_buffering", "innodb_doublewrite", "sync_binlog"}
		q = func(name string) string { return "SELECT @@" + name }
	}
	var parts []string
	for _, name := range names {
		var v string
		if err := db.QueryRowContext(ctx, q(name)).Scan(&v); err == nil {
			parts = append(parts, name+"="+v)
		}
	}
	return db.Dialect().Name() + ": " + strings.Join(parts, ", ")
}
