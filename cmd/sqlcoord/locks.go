package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sqlcoord/sqlcoord"
)

func newLocksCmd() *cobra.Command {
	cmd := groupCmd("locks", "PostgreSQL's lock protocol (advisory locks; row locks too during a rolling upgrade)")
	cmd.AddCommand(&cobra.Command{
		Use:   "protocol [advisory|dual]",
		Short: "Show, or switch, how PostgreSQL locks are taken",
		Long: `dual: each lock takes the advisory lock and the row lock, so instances of sqlcoord older than
schema version 14 (row locks only) are excluded too. advisory: advisory locks only, nothing
written — switch to it once every instance runs a sqlcoord that knows schema version 14.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var set *bool
			if len(args) == 1 {
				switch args[0] {
				case "advisory":
					set = new(bool)
				case "dual":
					set = new(bool)
					*set = true
				default:
					return usageError{fmt.Errorf("locks protocol %q: want advisory or dual", args[0])}
				}
			}
			db, err := openDB(cmd)
			if err != nil {
				return err
			}
			defer db.Close()
			if set != nil {
				if err := sqlcoord.SetLockProtocol(cmd.Context(), db, *set); err != nil {
					return err
				}
			}
			rowLocks, err := sqlcoord.LockProtocol(cmd.Context(), db)
			if err != nil {
				return err
			}
			mode := "advisory"
			if rowLocks {
				mode = "dual"
			}
			if db.Dialect().Family() != "postgres" {
				mode = "row"
			}
			if done, err := printJSON(cmd, map[string]any{"protocol": mode, "dialect": db.Dialect().Name()}); done || err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "lock protocol: %s (%s)\n", mode, db.Dialect().Name())
			return nil
		},
	})
	return cmd
}
