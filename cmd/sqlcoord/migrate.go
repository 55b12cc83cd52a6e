package main

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/sqlcoord/sqlcoord/migrate"

	"github.com/spf13/cobra"

	"github.com/sqlcoord/sqlcoord"
)

func newMigrateCmd() *cobra.Command {
	cmd := groupCmd("migrate", "Install, upgrade or remove sqlcoord's coord_ tables")
	cmd.Long = `Runs sqlcoord's embedded golang-migrate migrations. Bookkeeping lives in
coord_schema_migrations, so an application's own schema_migrations is untouched.`
	var yes bool
	run := func(use, short string, target func(args []string) (migrate.Target, error), nargs cobra.PositionalArgs) *cobra.Command {
		return &cobra.Command{
			Use: use, Short: short, Args: nargs,
			RunE: func(cmd *cobra.Command, args []string) error {
				t, err := target(args)
				if err != nil {
					return usageError{err}
				}
				if t == migrate.Down && !yes {
					return usageError{errors.New("migrate down drops every coord_ table and its data (locks, leases, keys, outbox, job runs): add --yes to do it")}
				}
				db, err := openDB(cmd, writes)
				if err != nil {
					return err
				}
				defer db.Close()
				before, err := sqlcoord.MigrationStatus(cmd.Context(), db)
				if err != nil {
					return err
				}
				if err := migrate.Migrate(cmd.Context(), db, t); err != nil {
					return err
				}
				if before.Ahead && t == migrate.Up {
					// a newer release migrated it: nothing to do here, and
					// nothing to fix (this release works on it)
					fmt.Fprintln(cmd.ErrOrStderr(), (&sqlcoord.SchemaAheadError{Version: before.Version, Latest: before.Latest}).Error())
				}
				return printStatus(cmd, db, &before)
			},
		}
	}
	down := run("down", "Revert all migrations (drops every coord_ table and its data; needs --yes)", func([]string) (migrate.Target, error) { return migrate.Down, nil }, cobra.NoArgs)
	down.Flags().BoolVar(&yes, "yes", false, "really drop every coord_ table")
	force := &cobra.Command{
		Use: "force N", Short: "After repairing a failed migration by hand: record version N and clear the dirty flag, running nothing",
		Long: `A migration that fails half-way leaves the schema "dirty" at its version V: up and down refuse
to run. Repair the coord_ tables by hand, then record where they are:
  sqlcoord migrate force V       the repair completed migration V
  sqlcoord migrate force V-1     the repair undid it (the version before V)
Any other N is refused (exit 4): the tables of N do not exist, and the next up would fail half-way.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := strconv.ParseUint(args[0], 10, 32)
			if err != nil {
				return usageError{fmt.Errorf("version %q is not a number", args[0])}
			}
			db, err := openDB(cmd, writes)
			if err != nil {
				return err
			}
			defer db.Close()
			if err := migrate.Force(cmd.Context(), db, uint(n)); err != nil {
				if errors.Is(err, migrate.ErrForce) {
					return exitError{exitUnhealthy, err}
				}
				return err
			}
			return printStatus(cmd, db, nil)
		},
	}
	cmd.AddCommand(
		run("up", "Apply all pending migrations", func([]string) (migrate.Target, error) { return migrate.Up, nil }, cobra.NoArgs),
		down, force,
		run("to N", "Migrate up or down to version N", func(args []string) (migrate.Target, error) {
			n, err := strconv.ParseUint(args[0], 10, 32)
			if err != nil {
				return migrate.Target{}, fmt.Errorf("version %q is not a number", args[0])
			}
			return migrate.To(uint(n)), nil
		}, cobra.ExactArgs(1)),
		&cobra.Command{
			Use: "status", Short: "Show applied and pending versions", Args: cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				db, err := openDB(cmd, reads)
				if err != nil {
					return err
				}
				defer db.Close()
				return printStatus(cmd, db, nil)
			},
		},
		&cobra.Command{
			Use: "version", Short: "Print the applied schema version only", Args: cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				db, err := openDB(cmd, reads)
				if err != nil {
					return err
				}
				defer db.Close()
				st, err := sqlcoord.MigrationStatus(cmd.Context(), db)
				if err != nil {
					return err
				}
				if done, err := printJSON(cmd, map[string]any{"version": st.Version, "dirty": st.Dirty}); done || err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), st.Version)
				return nil
			},
		},
	)
	return cmd
}

// printStatus prints the schema's state; with before (a migration ran),
// also what changed.
func printStatus(cmd *cobra.Command, db *sqlcoord.DB, before *sqlcoord.Status) error {
	st, err := sqlcoord.MigrationStatus(cmd.Context(), db)
	if err != nil {
		return err
	}
	var applied, reverted []uint
	if before != nil {
		all, _ := sqlcoord.Versions(db.Dialect().Family())
		for _, v := range all {
			switch {
			case v > before.Version && v <= st.Version:
				applied = append(applied, v)
			case v <= before.Version && v > st.Version:
				reverted = append(reverted, v)
			}
		}
	}
	out := map[string]any{"database": db.String(), "dialect": db.Dialect().Name(),
		"version": st.Version, "latest": st.Latest, "dirty": st.Dirty, "pending": st.Pending, "ahead": st.Ahead}
	if before != nil {
		out["applied"], out["reverted"] = nonNil(applied), nonNil(reverted)
	}
	if done, err := printJSON(cmd, out); done || err != nil {
		return err
	}
	w := cmd.OutOrStdout()
	fmt.Fprintf(w, "database: %s (%s)\n", db, db.Dialect().Name())
	switch {
	case before == nil:
	case len(applied) > 0:
		fmt.Fprintf(w, "applied %d migration(s): %s\n", len(applied), versionRange(applied))
	case len(reverted) > 0:
		fmt.Fprintf(w, "reverted %d migration(s): %s\n", len(reverted), versionRange(reverted))
	default:
		fmt.Fprintln(w, "nothing to apply")
	}
	if st.Ahead {
		fmt.Fprintf(w, "schema version: %d, newer than this release's %d: a newer release migrated it; this release works on it but cannot migrate it (run the newer release's migrate, or roll the schema back with it)\n", st.Version, st.Latest)
		return nil
	}
	fmt.Fprintf(w, "schema version: %d of %d", st.Version, st.Latest)
	if st.Dirty {
		fmt.Fprint(w, " (DIRTY: a migration failed half-way; see `sqlcoord migrate force --help`)")
	}
	fmt.Fprintln(w)
	if len(st.Pending) > 0 {
		fmt.Fprintf(w, "pending: %v (run `sqlcoord migrate up`)\n", st.Pending)
	} else {
		fmt.Fprintln(w, "up to date")
	}
	return nil
}

// versionRange is "3" or "1 to 16".
func versionRange(vs []uint) string {
	if len(vs) == 1 {
		return fmt.Sprint(vs[0])
	}
	return fmt.Sprintf("%d to %d", vs[0], vs[len(vs)-1])
}

// nonNil makes an empty list print as [] in JSON, never null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
