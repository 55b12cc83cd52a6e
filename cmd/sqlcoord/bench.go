//go:build bench

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sqlcoord/sqlcoord/migrate"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/bench"
	"github.com/sqlcoord/sqlcoord/internal/core"
	"github.com/sqlcoord/sqlcoord/outbox"
	"github.com/sqlcoord/sqlcoord/outbox/natspub"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/localdb"
)

func newBenchCmd() *cobra.Command {
	var dur time.Duration
	var clients, outDir string
	cmd := groupCmd("bench", "Benchmark the primitives beside the database's own mechanisms")
	var rows, batch, insClients int
	var groups, strategies string
	var keep, durable bool
	primRounds, primSlices := 1, 1
	runPrimitives := func(cmd *cobra.Command) error {
		cl, err := parseInts(clients)
		if err != nil {
			return usageError{err}
		}
		if primRounds < 1 {
			return usageError{fmt.Errorf("--rounds must be at least 1")}
		}
		if primSlices < 1 || primSlices > 1000 || (dur > 0 && dur/time.Duration(primSlices) < 10*time.Millisecond) {
			return usageError{fmt.Errorf("--slices must be 1 to 1000, each slice at least 10ms of --duration")}
		}
		cfg := bench.Config{Duration: dur, Clients: cl, Progress: cmd.OutOrStdout(), Slices: primSlices}
		var all []bench.Result
		natsPub, stopNATS, err := inProcessNATS()
		if err != nil {
			return err
		}
		defer stopNATS()
		outboxGroup := func(ctx context.Context, db *sqlcoord.DB, cfg bench.Config) ([]bench.Result, error) {
			return bench.Outbox(ctx, db, cfg, natsPub)
		}
		type group = func(context.Context, *sqlcoord.DB, bench.Config) ([]bench.Result, error)
		known := map[string]group{"locks": bench.Locks, "idempotency": bench.Idempotency, "ids": bench.IDs, "jobs": bench.Jobs, "outbox": outboxGroup, "saga": bench.Saga}
		var selected []group
		for _, g := range strings.Split(groups, ",") {
			fn, ok := known[strings.TrimSpace(g)]
			if !ok {
				return usageError{fmt.Errorf("--groups: unknown group %q (have locks, idempotency, ids, jobs, outbox, saga)", g)}
			}
			selected = append(selected, fn)
		}
		if durable {
			durableThrowaways()
		}
		settings, err := eachBenchDB(cmd, func(ctx context.Context, db *sqlcoord.DB) error {
			for _, group := range selected {
				var rounds [][]bench.Result
				for i := 0; i < primRounds; i++ {
					rs, err := group(ctx, db, cfg)
					if err != nil {
						all = append(all, rs...)
						return err
					}
					rounds = append(rounds, rs)
				}
				all = append(all, bench.Median(rounds)...)
			}
			return nil
		})
		if err != nil {
			return err
		}
		md := reportHead("primitives", "", settings) + bench.Markdown(all)
		return writeFile(cmd, outDir, "primitives", all, md)
	}
	runInserts := func(cmd *cobra.Command) error {
		if rows <= 0 || batch <= 0 || insClients <= 0 {
			return usageError{fmt.Errorf("--rows, --batch and --insert-clients must be positive")}
		}
		cfg := bench.InsertConfig{Rows: rows, Batch: batch, Clients: insClients, Keep: keep, Progress: cmd.OutOrStdout(), Bar: progressBar()}
		if strategies != "" {
			for _, st := range strings.Split(strategies, ",") {
				cfg.Only = append(cfg.Only, strings.TrimSpace(st))
			}
		}
		var all []bench.InsertResult
		settings, err := eachBenchDB(cmd, func(ctx context.Context, db *sqlcoord.DB) error {
			rs, err := bench.Inserts(ctx, db, cfg)
			all = append(all, rs...)
			return err
		})
		if err != nil {
			return err
		}
		return writeInsertsReport(cmd, outDir, all, settings)
	}
	prim := &cobra.Command{
		Use:   "primitives",
		Short: "Locks, leases, fenced writes, idempotency, ids and job claims beside the database's own mechanisms",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return runPrimitives(cmd) },
	}
	prim.Flags().StringVar(&groups, "groups", "locks,idempotency,ids,jobs,outbox", "benchmark groups to run (also: saga)")
	prim.Flags().IntVar(&primRounds, "rounds", 1, "run each group this many times; report the median round and the range of the ratios")
	prim.Flags().IntVar(&primSlices, "slices", 1, "locks and idempotency: measure each case in this many slices of --duration, the cases taking turns (A B B A …), so a case and its baseline see the same moments of a noisy machine")
	prim.Flags().BoolVar(&durable, "durable", true, "throwaway servers flush every commit (fsync on, as in production); --durable=false: tuned for tests")
	ins := &cobra.Command{
		Use:   "inserts",
		Short: "Insert time and on-disk size per primary-key strategy (auto-increment, UUIDv4/v1/v7, snowflake, segment)",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return runInserts(cmd) },
	}
	ins.Flags().IntVar(&rows, "rows", 200_000, "rows per strategy (--rows 1000000 reproduces the article)")
	ins.Flags().IntVar(&batch, "batch", 500, "rows per INSERT statement")
	ins.Flags().IntVar(&insClients, "insert-clients", 4, "concurrent inserting clients")
	ins.Flags().BoolVar(&keep, "keep", false, "keep the benchmark tables for inspection")
	ins.Flags().StringVar(&strategies, "strategies", "", "comma-separated subset, in this order (default: all)")
	var names, nameClients int
	var nameCleanup time.Duration
	lockNames := &cobra.Command{
		Use:   "locknames",
		Short: "One-off lock names (each used once): TryLock throughput and coord_locks size as names pile up, without and with CleanupLocks",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if names <= 0 || nameClients <= 0 || nameCleanup < 0 {
				return usageError{fmt.Errorf("--names and --lock-clients must be positive, --cleanup not negative")}
			}
			var all []bench.LockNamesRow
			settings, err := eachBenchDB(cmd, func(ctx context.Context, db *sqlcoord.DB) error {
				rs, err := bench.LockNames(ctx, db, bench.LockNamesConfig{Names: names, Clients: nameClients, Cleanup: nameCleanup, Progress: cmd.OutOrStdout()})
				all = append(all, rs...)
				return err
			})
			if err != nil {
				return err
			}
			md := reportHead("locknames", fmt.Sprintf("; %d names, %d clients", names, nameClients), settings) + bench.LockNamesMarkdown(all)
			return writeFile(cmd, outDir, "locknames", all, md)
		},
	}
	lockNames.Flags().IntVar(&names, "names", 1_000_000, "distinct names, each locked once (--names 10000000 for the issue's figure)")
	lockNames.Flags().IntVar(&nameClients, "lock-clients", 16, "concurrent lockers")
	lockNames.Flags().DurationVar(&nameCleanup, "cleanup", 2*time.Second, "second run: CleanupLocks of names older than this, this often (0: no second run)")
	var waitersS string
	var handoffs int
	var poll, hold time.Duration
	leaseWait := &cobra.Command{
		Use:   "leasewait",
		Short: "Lease hand-off: how soon after Release the next contender holds it, AcquireWait against polling, 1 and 32 contenders",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ws, err := parseInts(waitersS)
			if err != nil || handoffs <= 0 || poll <= 0 || hold < 0 {
				return usageError{fmt.Errorf("--waiters, --handoffs and --poll must be positive, --hold not negative")}
			}
			var all []bench.LeaseWaitRow
			settings, err := eachBenchDB(cmd, func(ctx context.Context, db *sqlcoord.DB) error {
				rs, err := bench.LeaseWait(ctx, db, bench.LeaseWaitConfig{Waiters: ws, Handoffs: handoffs, Hold: hold, Poll: poll})
				all = append(all, rs...)
				return err
			})
			if err != nil {
				return err
			}
			md := reportHead("leasewait", fmt.Sprintf("; %d hand-offs per case, each holder keeps the lease %v", handoffs, hold), settings) + bench.LeaseWaitMarkdown(all)
			fmt.Fprint(cmd.OutOrStdout(), bench.LeaseWaitMarkdown(all))
			return writeFile(cmd, outDir, "leasewait", all, md)
		},
	}
	leaseWait.Flags().StringVar(&waitersS, "waiters", "1,32", "contenders per case, comma-separated")
	leaseWait.Flags().IntVar(&handoffs, "handoffs", 200, "hand-offs measured per case")
	leaseWait.Flags().DurationVar(&poll, "poll", 10*time.Millisecond, "the polling baseline's interval")
	leaseWait.Flags().DurationVar(&hold, "hold", 2*time.Millisecond, "how long each holder keeps the lease")
	var relays, rounds int
	var rate float64
	listen := true
	notify := &cobra.Command{
		Use:   "notify",
		Short: "What running relays cost producers: Enqueue throughput without and with listening relays (throwaway servers with fsync on)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := parseInts(clients)
			if err != nil || relays <= 0 || rounds <= 0 || !(rate >= 0 && rate <= 1e6) {
				return usageError{fmt.Errorf("--clients, --relays and --rounds must be positive, --rate from 0 to 1000000")}
			}
			durableThrowaways() // the cost is the commit's: measure it with fsync on
			var all []bench.Result
			settings, err := eachBenchDB(cmd, func(ctx context.Context, db *sqlcoord.DB) error {
				rs, err := bench.NotifyCost(ctx, db, bench.Config{Duration: dur, Clients: cl, Progress: cmd.OutOrStdout(), Rate: rate}, relays, rounds, listen)
				all = append(all, rs...)
				return err
			})
			if err != nil {
				return err
			}
			md := reportHead("notify", fmt.Sprintf("; %d rounds per client count, alternating which case goes first", rounds), settings) + bench.Markdown(all)
			return writeFile(cmd, outDir, "notify", all, md)
		},
	}
	notify.Flags().IntVar(&relays, "relays", 3, "relays running in the second case")
	notify.Flags().IntVar(&rounds, "rounds", 3, "rounds per client count")
	notify.Flags().BoolVar(&listen, "listen", true, "relays listen for NOTIFY (PostgreSQL); false: they only poll")
	notify.Flags().Float64Var(&rate, "rate", 0, "messages per second offered to the producers in all (open loop); 0: as fast as they go")
	var sizesS, growthGroups, mergeFrom, dutiesS, ratesS string
	var partitionSize int
	var partitionEmpty bool
	var keyPeriod time.Duration
	var jobsMax int
	var cleanupFor time.Duration
	growth := &cobra.Command{
		Use:   "growth",
		Short: "Each primitive as its table grows: outbox, idempotency keys, job runs and sessions with 0, 1 M… rows already there, and their cleanups (throwaway servers with fsync on)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var sizes []int
			for i, f := range strings.Split(sizesS, ",") {
				n, err := strconv.Atoi(strings.TrimSpace(f))
				if err != nil || n < 0 || n > 100_000_000 || (i == 0) != (n == 0) || (i > 0 && n <= sizes[i-1]) {
					return usageError{fmt.Errorf("--sizes %q: growing row counts from 0 (at most 100000000)", sizesS)}
				}
				sizes = append(sizes, n)
			}
			var groups []string
			for _, g := range strings.Split(growthGroups, ",") {
				switch g = strings.TrimSpace(g); g {
				case "outbox", "outbox-partitioned", "keys", "keys-partitioned", "jobs", "sessions":
					groups = append(groups, g)
				default:
					return usageError{fmt.Errorf("--groups: unknown group %q (have outbox, outbox-partitioned, keys, keys-partitioned, jobs, sessions)", g)}
				}
			}
			if jobsMax <= 0 || cleanupFor <= 0 {
				return usageError{fmt.Errorf("--jobs-max and --cleanup must be positive")}
			}
			if keyPeriod < time.Second {
				return usageError{fmt.Errorf("--key-period %v: want at least 1s", keyPeriod)}
			}
			// the checks Open and every Wrap run
			duties, err := paceList("cleanup-duty", dutiesS, func(d float64) error { return core.ValidCleanupPace(d, 0) })
			if err != nil {
				return err
			}
			rates, err := paceList("cleanup-rate", ratesS, func(r float64) error {
				if r == 0 {
					return errors.New("want rows per second > 0")
				}
				return core.ValidCleanupPace(0, r)
			})
			if err != nil {
				return err
			}
			durableThrowaways()
			var rep bench.GrowthReport
			var settings []string
			if mergeFrom != "" { // an earlier run's results first (one dialect's, say)
				b, err := os.ReadFile(mergeFrom)
				if err != nil {
					return err
				}
				var prev struct {
					bench.GrowthReport
					Settings []string `json:"settings"`
				}
				if err := json.Unmarshal(b, &prev); err != nil {
					return fmt.Errorf("--merge %s: %w", mergeFrom, err)
				}
				rep, settings = prev.GrowthReport, prev.Settings
			}
			ran, err := eachBenchDB(cmd, func(ctx context.Context, db *sqlcoord.DB) error {
				r, err := bench.Growth(ctx, db, bench.GrowthConfig{Sizes: sizes, JobsMax: jobsMax, Groups: groups, Duration: dur, Cleanup: cleanupFor,
					CleanupDuties: duties, CleanupRates: rates, PartitionSize: partitionSize, PartitionEmpty: partitionEmpty, KeyPeriod: keyPeriod, Progress: func(l string) { fmt.Fprintln(cmd.OutOrStdout(), l) }})
				rep.Results = append(rep.Results, r.Results...)
				rep.Sizes = append(rep.Sizes, r.Sizes...)
				return err
			})
			if err != nil {
				return err
			}
			settings = append(settings, ran...)
			if err := os.MkdirAll(outDir, 0o755); err != nil {
				return err
			}
			chart := filepath.Join(outDir, "growth.png")
			if err := bench.GrowthChart(rep.Results, chart); err != nil {
				return err
			}
			md := reportHead("growth", fmt.Sprintf("; each case %v, each cleanup %v", dur, cleanupFor), settings) + bench.Markdown(rep.Results) +
				"\n## Table and index sizes\n\n" + bench.SizesMarkdown(rep.Sizes) + "\n![throughput against rows in the table](growth.png)\n"
			return writeFile(cmd, outDir, "growth", struct {
				bench.GrowthReport
				Settings []string `json:"settings"`
			}{rep, settings}, md)
		},
	}
	growth.Flags().StringVar(&sizesS, "sizes", "0,1000000", "rows already in each table, per step (from 0; --sizes 0,1000000,10000000 for the issue's figure)")
	growth.Flags().StringVar(&growthGroups, "groups", "outbox,keys,jobs,sessions", "tables to grow (also outbox-partitioned: the outbox cases on a partitioned outbox, partitions.Enable and Roll in place of Outbox.Cleanup; keys-partitioned: the keys cases on keys partitioned by period, partitions.EnableKeys and RollKeys; each on a database of its own)")
	growth.Flags().IntVar(&partitionSize, "partition-size", 1_000_000, "outbox-partitioned: ids per partition")
	growth.Flags().BoolVar(&partitionEmpty, "partition-empty", false, "outbox-partitioned: partition the empty table (curves against a partitioned table of 0 rows) instead of the one at the first size above 0 (measures partitions.Enable on it)")
	growth.Flags().DurationVar(&keyPeriod, "key-period", 10*time.Second, "keys-partitioned: the partition period (the cases wait two periods before the filled keys may be dropped)")
	growth.Flags().IntVar(&jobsMax, "jobs-max", 1_000_000, "job runs and sessions stop at this size")
	growth.Flags().DurationVar(&cleanupFor, "cleanup", 10*time.Second, "how long each cleanup case runs (a time box)")
	growth.Flags().StringVar(&dutiesS, "cleanup-duty", "0", "each cleanup case once per value, comma-separated: Options.CleanupDuty, the share of time it deletes (0: no pause)")
	growth.Flags().StringVar(&ratesS, "cleanup-rate", "", "each cleanup case also once per value, comma-separated: Options.CleanupRate, rows per second at most")
	growth.Flags().StringVar(&mergeFrom, "merge", "", "growth.json of an earlier run whose results come first in this report")
	all := &cobra.Command{
		Use:   "all",
		Short: "inserts, then primitives, with defaults",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rows, batch, insClients, groups, durable, primRounds = 200_000, 500, 4, "locks,idempotency,ids,jobs,outbox", true, 1
			if err := runInserts(cmd); err != nil {
				return err
			}
			return runPrimitives(cmd)
		},
	}
	cmd.AddCommand(prim, ins, lockNames, leaseWait, notify, growth, all)
	cmd.PersistentFlags().String("dialect", "", "with no --dsn: only this throwaway server (postgres or mysql)")
	cmd.PersistentFlags().DurationVar(&dur, "duration", 2*time.Second, "measuring time per case")
	cmd.PersistentFlags().StringVar(&clients, "clients", "1,8,32", "concurrent clients, comma-separated")
	cmd.PersistentFlags().StringVar(&outDir, "out", "bench/out", "folder for report.md and results.json")
	return cmd
}

// durableThrowaways makes the throwaway servers of this run flush every
// commit (fsync on; they are tuned for tests otherwise), unless the
// environment already says how to start them.
func durableThrowaways() {
	if os.Getenv("SQLCOORD_PG_ARGS") == "" {
		os.Setenv("SQLCOORD_PG_ARGS", "-c fsync=on -c synchronous_commit=on -c full_page_writes=on")
	}
	if os.Getenv("SQLCOORD_MYSQL_ARGS") == "" {
		os.Setenv("SQLCOORD_MYSQL_ARGS", "--innodb-flush-log-at-trx-commit=1")
	}
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 1024 {
			return nil, fmt.Errorf("--clients: %q is not a number from 1 to 1024", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// eachBenchDB runs fn on the --dsn database, or on throwaway PostgreSQL and
// MariaDB servers when no DSN is given, and returns each server's settings
// (bench.ServerSettings) for the report.
func eachBenchDB(cmd *cobra.Command, fn func(context.Context, *sqlcoord.DB) error) ([]string, error) {
	var settings []string
	withSettings := func(ctx context.Context, db *sqlcoord.DB) error {
		settings = append(settings, bench.ServerSettings(ctx, db))
		return fn(ctx, db)
	}
	err := eachBenchDBRun(cmd, withSettings)
	return settings, err
}

func eachBenchDBRun(cmd *cobra.Command, fn func(context.Context, *sqlcoord.DB) error) error {
	ctx := cmd.Context()
	if dsn := dsnFrom(cmd); dsn != "" {
		o, err := dbOptions(cmd, writes, sqlcoord.Options{MaxOpenConns: 64, MaxIdleConns: 64})
		if err != nil {
			return err
		}
		return openMigrated(ctx, dsn, o, fn)
	}
	fams := localdb.Families
	if d, _ := cmd.Flags().GetString("dialect"); d != "" {
		switch d {
		case "postgres":
			fams = []string{"postgres"}
		case "mysql", "mariadb":
			fams = []string{"mysql"}
		default:
			return usageError{fmt.Errorf("--dialect %q: want postgres or mysql", d)}
		}
	}
	for _, fam := range fams {
		fmt.Fprintf(cmd.OutOrStdout(), "no --dsn: starting a throwaway local %s server\n", fam)
		if fam == "postgres" {
			// statements per operation in the report (pg_stat_statements)
			os.Setenv("SQLCOORD_PG_ARGS", strings.TrimSpace(os.Getenv("SQLCOORD_PG_ARGS")+" -c shared_preload_libraries=pg_stat_statements"))
		}
		srv, err := localdb.Start(ctx, fam)
		if err != nil {
			return err
		}
		err = func() error {
			defer srv.Stop()
			dsn, err := srv.CreateDatabase(ctx, "sqlcoord_bench")
			if err != nil {
				return err
			}
			return openMigrated(ctx, dsn, sqlcoord.Options{MaxOpenConns: 64, MaxIdleConns: 64}, fn)
		}()
		if err != nil {
			return err
		}
	}
	return nil
}

// openMigrated opens dsn, installs the schema and runs fn.
func openMigrated(ctx context.Context, dsn string, o sqlcoord.Options, fn func(context.Context, *sqlcoord.DB) error) error {
	db, err := sqlcoord.Open(ctx, dsn, o)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := migrate.Migrate(ctx, db, migrate.Up); err != nil {
		return err
	}
	if db.Dialect().Family() == "postgres" {
		// Statements per operation, where the server can count them (a
		// throwaway server preloads the module; elsewhere, if allowed).
		db.ExecContext(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`)
	}
	return fn(ctx, db)
}

// writeFile writes name.json (v) and name.md (md) into dir and prints md.
func writeFile(cmd *cobra.Command, dir, name string, v any, md string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	js, _ := json.MarshalIndent(v, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, name+".json"), js, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, name+".md"), []byte(md), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "\n%s\nwrote %s and %s\n", md, filepath.Join(dir, name+".md"), filepath.Join(dir, name+".json"))
	return nil
}

func hostInfo() string {
	h, _ := os.Hostname()
	return fmt.Sprintf("host %s, %d CPUs", h, numCPU())
}

// progressBar draws a terminal progress bar for long loads when stderr is
// a terminal.
func progressBar() func(total int) (func(int), func()) {
	st, err := os.Stderr.Stat()
	if err != nil || st.Mode()&os.ModeCharDevice == 0 {
		return nil
	}
	return func(total int) (func(int), func()) {
		bar := progressbar.NewOptions(total, progressbar.OptionSetWriter(os.Stderr), progressbar.OptionShowCount(),
			progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())
		return func(n int) { bar.Add(n) }, func() { bar.Finish() }
	}
}

// reportHead is the top of a benchmark's report: its name, when and where
// it ran (detail follows the host), and every server's settings.
func reportHead(name, detail string, settings []string) string {
	return fmt.Sprintf("# sqlcoord bench %s\n\n%s, %s%s\n\nServer settings:\n\n- %s\n\n",
		name, time.Now().UTC().Format(time.RFC3339), hostInfo(), detail, strings.Join(settings, "\n- "))
}

func writeInsertsReport(cmd *cobra.Command, dir string, rs []bench.InsertResult, settings []string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	js, _ := json.MarshalIndent(map[string]any{"results": rs, "settings": settings}, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, "inserts.json"), js, 0o644); err != nil {
		return err
	}
	chart := filepath.Join(dir, "inserts.png")
	if err := bench.InsertsChart(rs, chart); err != nil {
		return err
	}
	md := reportHead("inserts", "", settings) + bench.InsertsMarkdown(rs) + "\n![insert time and size](inserts.png)\n"
	if err := os.WriteFile(filepath.Join(dir, "inserts.md"), []byte(md), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%s\nwrote %s, %s and %s\n", bench.InsertsMarkdown(rs), filepath.Join(dir, "inserts.md"), filepath.Join(dir, "inserts.json"), chart)
	return nil
}

// inProcessNATS starts a NATS server with JetStream in this process (the
// broker of the outbox benchmark) and a publisher to it.
func inProcessNATS() (outbox.Publisher, func(), error) {
	dir, err := os.MkdirTemp("", "sqlcoord-nats-")
	if err != nil {
		return nil, nil, err
	}
	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir, NoLog: true, NoSigs: true})
	if err != nil {
		return nil, nil, err
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		return nil, nil, fmt.Errorf("bench: in-process NATS did not start")
	}
	pub, closeFn, err := natspub.New(ns.ClientURL())
	if err != nil {
		return nil, nil, err
	}
	if _, err := pub.JS.CreateStream(context.Background(), jetstream.StreamConfig{Name: "BENCH", Subjects: []string{"orders.>"}, Duplicates: time.Minute, Storage: jetstream.MemoryStorage}); err != nil {
		return nil, nil, err
	}
	return pub, func() { closeFn(); ns.Shutdown(); os.RemoveAll(dir) }, nil
}

// paceList reads a comma-separated --flag of numbers, each passing check
// ("" is none).
func paceList(flag, s string, check func(float64) error) ([]float64, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []float64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil {
			return nil, usageError{fmt.Errorf("--%s: %q is not a number", flag, f)}
		}
		if err := check(v); err != nil {
			return nil, usageError{fmt.Errorf("--%s %q: %w", flag, f, err)}
		}
		out = append(out, v)
	}
	return out, nil
}
