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
				db, err := openDB(cmd)
				if err != nil {
					return err
				}
				defer db.Close()
				if err := migrate.Migrate(cmd.Context(), db, t); err != nil {
					return err
				}
				return printStatus(cmd, db)
			},
		}
	}
	down := run("down", "Revert all migrations (drops every coord_ table and its data; needs --yes)", func([]string) (migrate.Target, error) { return migrate.Down, nil }, cobra.NoArgs)
	down.Flags().BoolVar(&yes, "yes", false, "really drop every coord_ table")
	force := &cobra.Command{
		Use: "force N", Short: "Record version N as applied and clear the dirty flag, running nothing (after repairing a failed migration by hand)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := strconv.ParseUint(args[0], 10, 32)
			if err != nil {
				return usageError{fmt.Errorf("version %q is not a number", args[0])}
			}
			db, err := openDB(cmd)
			if err != nil {
				return err
			}
			defer db.Close()
			if err := migrate.Force(cmd.Context(), db, uint(n)); err != nil {
				return err
			}
			return printStatus(cmd, db)
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
				db, err := openDB(cmd)
				if err != nil {
					return err
				}
				defer db.Close()
				return printStatus(cmd, db)
			},
		},
		&cobra.Command{
			Use: "version", Short: "Print the applied schema version only", Args: cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				db, err := openDB(cmd)
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

func printStatus(cmd *cobra.Command, db *sqlcoord.DB) error {
	st, err := sqlcoord.MigrationStatus(cmd.Context(), db)
	if err != nil {
		return err
	}
	if done, err := printJSON(cmd, map[string]any{"database": db.String(), "dialect": db.Dialect().Name(),
		"version": st.Version, "latest": st.Latest, "dirty": st.Dirty, "pending": st.Pending}); done || err != nil {
		return err
	}
	w := cmd.OutOrStdout()
	fmt.Fprintf(w, "database: %s (%s)\n", db, db.Dialect().Name())
	fmt.Fprintf(w, "schema version: %d of %d", st.Version, st.Latest)
	if st.Dirty {
		fmt.Fprint(w, " (DIRTY: a migration failed half-way)")
	}
	fmt.Fprintln(w)
	if len(st.Pending) > 0 {
		fmt.Fprintf(w, "pending: %v (run `sqlcoord migrate up`)\n", st.Pending)
	} else {
		fmt.Fprintln(w, "up to date")
	}
	return nil
}
