// Command sqlcoord installs sqlcoord's schema, runs live demonstrations of
// its primitives and benchmarks them.
//
//	sqlcoord migrate up|down|status|version|to N --dsn DSN
//	sqlcoord demo [scenario...] [--dsn DSN | --dialect postgres|mysql]
//	sqlcoord version
//
// The DSN may also come from SQLCOORD_DSN.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/internal/redact"
)

// Version is the library's release unless the build sets another
// (-ldflags "-X main.Version=...").
var Version = sqlcoord.Version

// usageError marks errors that should exit with status 2.
type usageError struct{ error }

// Unwrap exposes the cause to errors.Is/As.
func (u usageError) Unwrap() error { return u.error }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := newRoot()
	err := root.ExecuteContext(ctx)
	if err != nil {
		// Whatever failed, no secret of the DSN and no URL userinfo
		// reaches the terminal.
		flagDSN, _ := root.PersistentFlags().GetString("dsn")
		msg := redact.Text(err.Error(), flagDSN, os.Getenv("SQLCOORD_DSN"), os.Getenv("SQLCOORD_LISTEN_DSN"))
		if !strings.HasPrefix(msg, "sqlcoord:") {
			msg = "sqlcoord: " + msg
		}
		fmt.Fprintln(os.Stderr, msg)
		var ue usageError
		if errors.As(err, &ue) || strings.HasPrefix(err.Error(), "unknown command") {
			os.Exit(2)
		}
		if ctx.Err() != nil {
			os.Exit(130)
		}
		os.Exit(1)
	}
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "sqlcoord",
		Short:         "Coordination primitives enforced by PostgreSQL and MySQL/MariaDB",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usageError{err} })
	root.Version = Version
	root.SetVersionTemplate("sqlcoord {{.Version}}\n")
	root.PersistentFlags().String("dsn", "", "database DSN (postgres://… or mysql://…); default $SQLCOORD_DSN")
	root.PersistentFlags().Bool("json", false, "print data as JSON (commands that print data)")
	root.AddCommand(newVersionCmd(), newMigrateCmd(), newDemoCmd(), newHoldLockCmd(), newDrawSegmentCmd(), newBenchCmd(), newJobsCmd(), newRelayCmd(), newOutboxCmd(), newDoctorCmd(), newSessionsCmd(), newConsoleCmd(), newLocksCmd(), newEpochCmd())
	return root
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the sqlcoord version and the newest schema version it ships",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			pg, _ := sqlcoord.Versions("postgres")
			my, _ := sqlcoord.Versions("mysql")
			fmt.Fprintf(cmd.OutOrStdout(), "sqlcoord %s (schema: postgres %d, mysql %d)\n", Version, pg[len(pg)-1], my[len(my)-1])
			return nil
		},
	}
}

// groupCmd is a command that only holds subcommands: run bare it prints
// its help; with an unknown subcommand it is a usage error (exit 2), not
// help and success.
func groupCmd(use, short string) *cobra.Command {
	return &cobra.Command{
		Use: use, Short: short, Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError{fmt.Errorf("unknown command %q for %q (see `%s --help`)", args[0], cmd.CommandPath(), cmd.CommandPath())}
			}
			return cmd.Help()
		},
	}
}

// printJSON writes v as indented JSON when --json was given and reports
// whether it did.
func printJSON(cmd *cobra.Command, v any) (bool, error) {
	if on, _ := cmd.Flags().GetBool("json"); !on {
		return false, nil
	}
	enc := json.NewEncoder(cmd.OutOrStdout())
	enc.SetIndent("", "  ")
	return true, enc.Encode(v)
}

// dsnFrom returns --dsn or $SQLCOORD_DSN.
func dsnFrom(cmd *cobra.Command) string {
	dsn, _ := cmd.Flags().GetString("dsn")
	if dsn == "" {
		dsn = os.Getenv("SQLCOORD_DSN")
	}
	return dsn
}

// openDB opens the DSN from flags/environment or fails with a usage error.
func openDB(cmd *cobra.Command, opts ...sqlcoord.Options) (*sqlcoord.DB, error) {
	dsn := dsnFrom(cmd)
	if dsn == "" {
		return nil, usageError{errors.New("no database: pass --dsn or set SQLCOORD_DSN")}
	}
	return sqlcoord.Open(cmd.Context(), dsn, opts...)
}

// openInstalled is openDB for the daemons (relay, console): the schema
// must be installed and current, or they refuse to start.
func openInstalled(cmd *cobra.Command, opts ...sqlcoord.Options) (*sqlcoord.DB, error) {
	db, err := openDB(cmd, opts...)
	if err != nil {
		return nil, err
	}
	if err := sqlcoord.CheckSchema(cmd.Context(), db); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

func numCPU() int { return runtime.NumCPU() }
