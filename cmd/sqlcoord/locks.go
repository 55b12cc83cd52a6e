package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sqlcoord/sqlcoord"
)

func newLocksCmd() *cobra.Command {
	cmd := groupCmd("locks", "PostgreSQL's lock protocol (advisory locks; row locks too during a rolling upgrade)")
	cmd.AddCommand(&cobra.Command{
		Use:   "protocol [advisory|advisory+id|dual]",
		Short: "Show, or switch, how PostgreSQL locks are taken",
		Long: `advisory: one advisory lock on a 64-bit hash of the name, nothing written — switch to it
once every instance runs a sqlcoord of schema version 15 or later.
advisory+id: also the advisory lock on the name's permanent id, so instances of schema version
14 are excluded too. dual: also the row lock, for instances older than schema version 14.
An upgraded database keeps the older locks until switched; a fresh one starts at advisory.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var set sqlcoord.LockProtocolMode
			if len(args) == 1 {
				switch m := sqlcoord.LockProtocolMode(args[0]); m {
				case sqlcoord.LocksAdvisory, sqlcoord.LocksAdvisoryID, sqlcoord.LocksDual:
					set = m
				default:
					return usageError{fmt.Errorf("locks protocol %q: want advisory, advisory+id or dual", args[0])}
				}
			}
			db, err := openDB(cmd, access(set == ""))
			if err != nil {
				return err
			}
			defer db.Close()
			if set != "" {
				if err := sqlcoord.SetLockProtocol(cmd.Context(), db, set); err != nil {
					return err
				}
			}
			mode, err := sqlcoord.LockProtocol(cmd.Context(), db)
			if err != nil {
				return err
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
