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
	"io"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/internal/errs"
	"github.com/sqlcoord/sqlcoord/internal/redact"
)

// Version is the library's release unless the build sets another
// (-ldflags "-X main.Version=...").
var Version = sqlcoord.Version

// Exit statuses, as docs/cli.md lists them.
const (
	exitOK          = 0   // done
	exitFailed      = 1   // it could not be done (a connection, the server, a publisher)
	exitUsage       = 2   // the command line is wrong; nothing connected
	exitUnread      = 3   // doctor: some fact could not be read (what it printed is all it knows)
	exitUnhealthy   = 4   // the database is not ready: no or old or dirty schema, read-only server, a required guarantee fails
	exitNotFound    = 5   // the job, slot or message named does not exist
	exitAhead       = 6   // the schema is newer than this binary (a rollback): it works on it, but cannot migrate it
	exitInterrupted = 130 // SIGINT/SIGTERM before it finished
)

// usageError marks errors that should exit with status 2.
type usageError struct{ error }

// Unwrap exposes the cause to errors.Is/As.
func (u usageError) Unwrap() error { return u.error }

// exitError carries an exit status other than the one its cause implies.
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string { return e.err.Error() }
func (e exitError) Unwrap() error { return e.err }

// notFound marks a name the database does not know (exit 5).
func notFound(err error) error { return exitError{exitNotFound, err} }

// exitCode maps what a command returned to the process's status.
func exitCode(ctx context.Context, err error) int {
	var ue usageError
	var ee exitError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue), strings.HasPrefix(err.Error(), "unknown command"), strings.HasPrefix(err.Error(), "unknown flag"),
		errors.Is(err, sqlcoord.ErrBadDSN): // a DSN that does not parse is a bad argument
		return exitUsage
	case errors.As(err, &ee):
		return ee.code
	case ctx.Err() != nil:
		return exitInterrupted
	case errors.Is(err, sqlcoord.ErrSchemaAhead):
		return exitAhead
	case errors.Is(err, sqlcoord.ErrNoSchema), errors.Is(err, sqlcoord.ErrDirty), errors.Is(err, sqlcoord.ErrReadOnly), errors.Is(err, sqlcoord.ErrStalePrimary):
		return exitUnhealthy
	}
	return exitFailed
}

// interrupted records a SIGINT (Ctrl-C): a command it stopped did not
// finish (130), while SIGTERM — a service manager stopping relay, console
// or saga run — is a clean stop (0).
var interrupted atomic.Bool

func main() {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		sig := <-sigs
		interrupted.Store(sig == os.Interrupt)
		cancel()
		signal.Stop(sigs)
	}()
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	cancel()
	os.Exit(code)
}

// run runs one command line and returns its exit status; the error, if
// any, goes to stderr without any secret of the DSN or URL userinfo.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRoot()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		if ctx.Err() != nil && interrupted.Load() { // stopped by SIGINT: it did not finish
			return exitInterrupted
		}
		return exitOK
	}
	flagDSN, _ := root.PersistentFlags().GetString("dsn")
	msg := redact.Text(err.Error(), flagDSN, os.Getenv("SQLCOORD_DSN"), os.Getenv("SQLCOORD_LISTEN_DSN"))
	if !strings.HasPrefix(msg, "sqlcoord:") && !strings.HasPrefix(msg, "sqlcoord ") { // "sqlcoord saga show: …" names itself
		msg = "sqlcoord: " + msg
	}
	fmt.Fprintln(stderr, errs.Once(msg)) // each package's name once: not "saga: retry: saga: …
	return exitCode(ctx, err)
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
	root.PersistentFlags().Bool("pooler", false, "the DSN reaches PostgreSQL through a transaction-mode pooler (PgBouncer): no named prepared statements; default $SQLCOORD_POOLER, and on by itself when the server's port differs from the DSN's")
	root.AddCommand(newVersionCmd(), newMigrateCmd(), newDemoCmd(), newHoldLockCmd(), newDrawSegmentCmd(), newShardWorkerCmd(), newBenchCmd(), newJobsCmd(), newRelayCmd(), newOutboxCmd(), newDoctorCmd(), newSessionsCmd(), newConsoleCmd(), newLocksCmd(), newEpochCmd(), newSagaCmd(), newLeaderCmd(), newSemaphoreCmd(), newCleanupCmd(), newPartitionsCmd())
	usageArgs(root)
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
			if done, err := printJSON(cmd, map[string]any{"version": Version, "schema": map[string]uint{"postgres": pg[len(pg)-1], "mysql": my[len(my)-1]}}); done || err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "sqlcoord %s (schema: postgres %d, mysql %d)\n", Version, pg[len(pg)-1], my[len(my)-1])
			return nil
		},
	}
}

// groupCmd is a command that only holds subcommands: run bare it prints
// its help on stderr and a usage error (exit 2), as with an unknown
// subcommand: not help and success.
func groupCmd(use, short string) *cobra.Command {
	return &cobra.Command{
		Use: use, Short: short, Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError{fmt.Errorf("unknown command %q for %q (see `%s --help`)", args[0], cmd.CommandPath(), cmd.CommandPath())}
			}
			// alone, it is an incomplete command line: its help on stderr, exit 2
			cmd.SetOut(cmd.ErrOrStderr())
			cmd.Help()
			var names []string
			for _, s := range cmd.Commands() {
				if s.IsAvailableCommand() {
					names = append(names, s.Name())
				}
			}
			return usageError{fmt.Errorf("%s needs a command: %s", cmd.CommandPath(), strings.Join(names, ", "))}
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

// usageArgs makes every command's argument check a usage error (exit 2),
// checked by cobra before the command runs, so before it connects.
func usageArgs(c *cobra.Command) {
	if check := c.Args; check != nil {
		c.Args = func(c *cobra.Command, args []string) error {
			if err := check(c, args); err != nil {
				var ue usageError
				if errors.As(err, &ue) {
					return err
				}
				return usageError{fmt.Errorf("%s: %w", c.CommandPath(), err)}
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		usageArgs(sub)
	}
}

// access says whether a command writes (it needs a primary) or only
// reads (a hot standby or read-only replica will do).
type access bool

const (
	writes access = false
	reads  access = true
)

// dbOptions are the options every command opens the database with:
// --pooler or $SQLCOORD_POOLER, and for a reading command, a standby.
func dbOptions(cmd *cobra.Command, a access, o sqlcoord.Options) (sqlcoord.Options, error) {
	pooler, _ := cmd.Flags().GetBool("pooler")
	if !cmd.Flags().Changed("pooler") {
		if env := os.Getenv("SQLCOORD_POOLER"); env != "" {
			v, err := strconv.ParseBool(env)
			if err != nil {
				return o, usageError{fmt.Errorf("SQLCOORD_POOLER=%q: want true or false", env)}
			}
			pooler = v
		}
	}
	o.Pooler = o.Pooler || pooler
	o.AllowReadOnly = o.AllowReadOnly || a == reads
	return o, nil
}

// openDB opens the DSN from flags/environment or fails with a usage error.
func openDB(cmd *cobra.Command, a access, opts ...sqlcoord.Options) (*sqlcoord.DB, error) {
	dsn := dsnFrom(cmd)
	if dsn == "" {
		return nil, usageError{errors.New("no database: pass --dsn or set SQLCOORD_DSN")}
	}
	var o sqlcoord.Options
	if len(opts) > 0 {
		o = opts[0]
	}
	o, err := dbOptions(cmd, a, o)
	if err != nil {
		return nil, err
	}
	return sqlcoord.Open(cmd.Context(), dsn, o)
}

// openInstalled is openDB for the daemons (relay, console): the schema
// must be installed and current, or they refuse to start.
func openInstalled(cmd *cobra.Command, a access, opts ...sqlcoord.Options) (*sqlcoord.DB, error) {
	db, err := openDB(cmd, a, opts...)
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
