package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/sqlcoord/sqlcoord"
)

func newEpochCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "epoch [advance]",
		Short: "Show the database's failover epochs, or start a new one (a failover tool's hook)",
		Long: `Every counter that must never go back (fencing tokens, segment ranges, job attempts) is floored by
the failover epoch of the history that issues it. A promoted standby or replica, a point-in-time
recovery and a restore into another PostgreSQL cluster start a new epoch by themselves, at their first
counter. advance starts one on purpose: run it after a restore that cannot be detected (a MariaDB dump
or snapshot restored onto a server with the same server_id) or from a failover tool's hook.
See docs/failover.md.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 && args[0] != "advance" {
				return usageError{fmt.Errorf("epoch %q: want no argument or advance", args[0])}
			}
			db, err := openInstalled(cmd, access(len(args) == 0))
			if err != nil {
				return err
			}
			defer db.Close()
			var advanced int64
			if len(args) == 1 {
				if advanced, err = sqlcoord.AdvanceEpoch(cmd.Context(), db); err != nil {
					return err
				}
			}
			forks, err := sqlcoord.Forks(cmd.Context(), db)
			if err != nil {
				return err
			}
			if done, err := printJSON(cmd, map[string]any{"dialect": db.Dialect().Name(), "forks": forks, "advanced_to": advanced}); done || err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if advanced != 0 {
				fmt.Fprintf(w, "new epoch: base %d\n", advanced)
			}
			if len(forks) == 0 {
				fmt.Fprintf(w, "no failover epochs on %s\n", db.Dialect().Name())
				return nil
			}
			fmt.Fprintf(w, "%-28s %-20s %-20s %s\n", "history", "base", "first seen (UTC)", "reason")
			for _, f := range forks {
				mark := ""
				if f.Current {
					mark = "  <- this server, current"
				}
				fmt.Fprintf(w, "%-28s %-20d %-20s %s%s\n", f.History, f.Base, f.FirstSeen.UTC().Format(time.DateTime), f.Reason, mark)
			}
			return nil
		},
	}
	return cmd
}
