package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/bench"
	"github.com/sqlcoord/sqlcoord/internal/dbtest"
)

func newBenchCmd() *cobra.Command {
	var dur time.Duration
	var clients, outDir string
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Benchmark the primitives beside the database's own mechanisms",
	}
	prim := func(use string) *cobra.Command {
		return &cobra.Command{
			Use:   use,
			Short: "Locks, leases, fenced writes and idempotency keys beside the database's own mechanisms",
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				cl, err := parseInts(clients)
				if err != nil {
					return usageError{err}
				}
				cfg := bench.Config{Duration: dur, Clients: cl, Progress: cmd.OutOrStdout()}
				var all []bench.Result
				err = eachBenchDB(cmd, func(ctx context.Context, db *sqlcoord.DB) error {
					for _, group := range []func(context.Context, *sqlcoord.DB, bench.Config) ([]bench.Result, error){
						bench.Locks, bench.Idempotency, bench.IDs, bench.Jobs,
					} {
						rs, err := group(ctx, db, cfg)
						all = append(all, rs...)
						if err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					return err
				}
				return writeReport(cmd, outDir, "primitives", all)
			},
		}
	}
	cmd.AddCommand(prim("primitives"), prim("all"))
	cmd.PersistentFlags().DurationVar(&dur, "duration", 2*time.Second, "measuring time per case")
	cmd.PersistentFlags().StringVar(&clients, "clients", "1,8,32", "concurrent clients, comma-separated")
	cmd.PersistentFlags().StringVar(&outDir, "out", "bench/out", "folder for report.md and results.json")
	return cmd
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
// MariaDB servers when no DSN is given.
func eachBenchDB(cmd *cobra.Command, fn func(context.Context, *sqlcoord.DB) error) error {
	ctx := cmd.Context()
	if dsn := dsnFrom(cmd); dsn != "" {
		db, err := sqlcoord.Open(ctx, dsn, sqlcoord.Options{MaxOpenConns: 64, MaxIdleConns: 64})
		if err != nil {
			return err
		}
		defer db.Close()
		if err := sqlcoord.Migrate(ctx, db, sqlcoord.Up); err != nil {
			return err
		}
		return fn(ctx, db)
	}
	for _, fam := range dbtest.Families {
		fmt.Fprintf(cmd.OutOrStdout(), "no --dsn: starting a throwaway local %s server\n", fam)
		srv, err := dbtest.Start(ctx, fam)
		if err != nil {
			return err
		}
		err = func() error {
			defer srv.Stop()
			dsn, err := srv.CreateDatabase(ctx, "sqlcoord_bench")
			if err != nil {
				return err
			}
			db, err := sqlcoord.Open(ctx, dsn, sqlcoord.Options{MaxOpenConns: 64, MaxIdleConns: 64})
			if err != nil {
				return err
			}
			defer db.Close()
			if err := sqlcoord.Migrate(ctx, db, sqlcoord.Up); err != nil {
				return err
			}
			return fn(ctx, db)
		}()
		if err != nil {
			return err
		}
	}
	return nil
}

func writeReport(cmd *cobra.Command, dir, name string, rs []bench.Result) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	js, _ := json.MarshalIndent(rs, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, name+".json"), js, 0o644); err != nil {
		return err
	}
	md := fmt.Sprintf("# sqlcoord bench %s\n\n%s, %s\n\n%s", name, time.Now().UTC().Format(time.RFC3339), hostInfo(), bench.Markdown(rs))
	if err := os.WriteFile(filepath.Join(dir, name+".md"), []byte(md), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "\n%s\nwrote %s and %s\n", bench.Markdown(rs), filepath.Join(dir, name+".md"), filepath.Join(dir, name+".json"))
	return nil
}

func hostInfo() string {
	h, _ := os.Hostname()
	return fmt.Sprintf("host %s, %d CPUs", h, numCPU())
}
