package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
	"time"

	"github.com/sqlcoord/sqlcoord/migrate"

	"github.com/spf13/cobra"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/localdb"
)

// demoEnv is what a scenario gets: an open, migrated database and a writer.
type demoEnv struct {
	DB  *sqlcoord.DB
	Out io.Writer
	// NewDatabase gives a scenario a fresh connection pool on the same
	// database (for "another instance").
	Open func(ctx context.Context) (*sqlcoord.DB, error)
	// Self is the path of this executable, for scenarios that run helper
	// processes (kill -9 demonstrations).
	Self string
}

func (e *demoEnv) printf(format string, args ...any) { fmt.Fprintf(e.Out, format, args...) }

type scenario struct {
	name, title string
	run         func(ctx context.Context, e *demoEnv) error
}

var scenarios = map[string]scenario{}

func register(s scenario) { scenarios[s.name] = s }

func scenarioNames() []string {
	var n []string
	for k := range scenarios {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

func newDemoCmd() *cobra.Command {
	var dialect string
	cmd := &cobra.Command{
		Use:   "demo [scenario...]",
		Short: "Run live demonstrations of the primitives (all scenarios by default)",
		Long: `Runs the scenarios from sqlcoord's design notes against a real database.
With no --dsn (and no SQLCOORD_DSN) it starts a throwaway local server
(PostgreSQL by default, MariaDB with --dialect mysql), runs everything in a
fresh database and removes the server afterwards.

With --dsn it installs the coord_ schema in that database (migrate up) and
creates and drops demo_* tables there: use a scratch database.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, a := range args {
				if _, ok := scenarios[a]; !ok {
					return usageError{fmt.Errorf("unknown scenario %q (have: %s)", a, strings.Join(scenarioNames(), ", "))}
				}
			}
			if len(args) == 0 {
				args = scenarioNames()
			}
			ctx := cmd.Context()
			out := cmd.OutOrStdout()
			dsn := dsnFrom(cmd)
			if dsn == "" {
				fam := "postgres"
				if dialect == "mysql" || dialect == "mariadb" {
					fam = "mysql"
				} else if dialect != "" && dialect != "postgres" {
					return usageError{fmt.Errorf("--dialect %q: want postgres or mysql", dialect)}
				}
				fmt.Fprintf(out, "no --dsn given: starting a throwaway local %s server (embedded default)…\n", fam)
				start := time.Now()
				srv, err := localdb.Start(ctx, fam)
				if err != nil {
					return err
				}
				defer srv.Stop()
				dsn, err = srv.CreateDatabase(ctx, "sqlcoord_demo")
				if err != nil {
					return err
				}
				fmt.Fprintf(out, "server ready on %s:%d in %v (%s); it is removed when the demo ends\n\n", srv.Host, srv.Port, time.Since(start).Round(time.Millisecond), srv.Source)
			}
			o, err := dbOptions(cmd, writes, sqlcoord.Options{})
			if err != nil {
				return err
			}
			db, err := sqlcoord.Open(ctx, dsn, o)
			if err != nil {
				return err
			}
			defer db.Close()
			if err := migrate.Migrate(ctx, db, migrate.Up); err != nil {
				return err
			}
			self, _ := os.Executable()
			env := &demoEnv{DB: db, Out: out, Self: self, Open: func(ctx context.Context) (*sqlcoord.DB, error) { return sqlcoord.Open(ctx, dsn, o) }}
			st, _ := sqlcoord.MigrationStatus(ctx, db)
			fmt.Fprintf(out, "database %s (%s), schema version %d\n", db, db.Dialect().Name(), st.Version)
			for _, name := range args {
				s := scenarios[name]
				fmt.Fprintf(out, "\n=== %s: %s ===\n", s.name, s.title)
				if err := s.run(ctx, env); err != nil {
					return fmt.Errorf("demo %s: %w", name, err)
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&dialect, "dialect", "", "throwaway server to start when no DSN is given: postgres (default) or mysql")
	return cmd
}

// demoChild is a helper process of the demonstration: this executable
// with args, given the database's DSN through SQLCOORD_DSN rather than
// --dsn, so its password is not in the process list (ps shows every
// process's arguments to every user of the machine).
func demoChild(ctx context.Context, self, dsn string, args ...string) *exec.Cmd {
	c := exec.CommandContext(ctx, self, args...)
	c.Env = append(os.Environ(), "SQLCOORD_DSN="+dsn)
	return c
}
