package main

import (
	"database/sql"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sqlcoord/sqlcoord/coord"
)

// openElection opens the database and the election name (a bad name is a
// usage error); done closes the database.
func openElection(cmd *cobra.Command, name string, a access) (*coord.Election[*sql.Tx], func(), error) {
	db, err := openDB(cmd, a)
	if err != nil {
		return nil, nil, err
	}
	e, err := coord.New(db).Election(name, coord.ElectionOptions{ID: "sqlcoord-cli"})
	if err != nil {
		db.Close()
		return nil, nil, usageError{err}
	}
	return e, func() { db.Close() }, nil
}

func newLeaderCmd() *cobra.Command {
	cmd := groupCmd("leader", "Inspect leader elections (coord.Election) and depose a leader")
	var limit int
	list := &cobra.Command{
		Use: "list", Short: "List elections with their newest term", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			db, err := openDB(cmd, reads)
			if err != nil {
				return err
			}
			defer db.Close()
			ls, err := coord.New(db).Elections(cmd.Context(), limit)
			if err != nil {
				return err
			}
			if done, err := printJSON(cmd, nonNil(ls)); done || err != nil {
				return err
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ELECTION\tTERM\tLEADER\tLIVE\tSINCE (UTC)\tVALUE")
			for _, l := range ls {
				fmt.Fprintf(w, "%s\t%d\t%s\t%v\t%s\t%s\n", l.Election, l.Term, l.ID, l.Live, l.Since.UTC().Format(time.RFC3339), l.Value)
			}
			return w.Flush()
		},
	}
	list.Flags().IntVar(&limit, "limit", 100, "list at most this many")
	show := &cobra.Command{
		Use: "show NAME", Short: "Show an election's current leader", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			e, done, err := openElection(cmd, args[0], reads)
			if err != nil {
				return err
			}
			defer done()
			l, err := e.Leader(cmd.Context())
			if err != nil {
				return err
			}
			if done, err := printJSON(cmd, l); done || err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "election %s: leader %s, term %d, since %s, expires %s\nvalue: %s\n",
				l.Election, l.ID, l.Term, l.Since.UTC().Format(time.RFC3339), l.ExpiresAt.UTC().Format(time.RFC3339Nano), l.Value)
			return nil
		},
	}
	resign := &cobra.Command{
		Use: "resign NAME", Short: "End the current leader's term (the next candidate is elected with a larger term)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			e, done, err := openElection(cmd, args[0], writes)
			if err != nil {
				return err
			}
			defer done()
			l, err := e.Depose(cmd.Context())
			if err != nil {
				return err
			}
			if done, err := printJSON(cmd, l); done || err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "election %s: term %d of %s ended\n", l.Election, l.Term, l.ID)
			return nil
		},
	}
	cmd.AddCommand(list, show, resign)
	return cmd
}

func newSemaphoreCmd() *cobra.Command {
	cmd := groupCmd("semaphore", "Inspect semaphores (coord.Semaphore), change their permits, revoke a permit")
	var limit int
	list := &cobra.Command{
		Use: "list", Short: "List semaphores with their permits and holders", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			db, err := openDB(cmd, reads)
			if err != nil {
				return err
			}
			defer db.Close()
			ss, err := coord.New(db).Semaphores(cmd.Context(), limit)
			if err != nil {
				return err
			}
			if done, err := printJSON(cmd, nonNil(ss)); done || err != nil {
				return err
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', 0)
			fmt.Fprintln(w, "SEMAPHORE\tPERMITS\tHELD")
			for _, s := range ss {
				fmt.Fprintf(w, "%s\t%d\t%d\n", s.Name, s.Permits, s.Held)
			}
			return w.Flush()
		},
	}
	list.Flags().IntVar(&limit, "limit", 100, "list at most this many")
	open := func(cmd *cobra.Command, name string, a access) (*coord.Semaphore[*sql.Tx], func(), error) {
		db, err := openDB(cmd, a)
		if err != nil {
			return nil, nil, err
		}
		s, err := coord.New(db).Semaphore(name, 1)
		if err != nil {
			db.Close()
			return nil, nil, usageError{err}
		}
		return s, func() { db.Close() }, nil
	}
	show := &cobra.Command{
		Use: "show NAME", Short: "Show a semaphore's holders", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, done, err := open(cmd, args[0], reads)
			if err != nil {
				return err
			}
			defer done()
			info, err := s.Info(cmd.Context())
			if err != nil {
				return err
			}
			hs, err := s.Holders(cmd.Context())
			if err != nil {
				return err
			}
			if ok, err := printJSON(cmd, map[string]any{"name": info.Name, "permits": info.Permits, "holders": nonNil(hs)}); ok || err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "semaphore %s: %d permits, %d held\n", info.Name, info.Permits, len(hs))
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', 0)
			fmt.Fprintln(w, "SLOT\tOWNER\tTOKEN\tACQUIRED (UTC)\tEXPIRES (UTC)")
			for _, h := range hs {
				fmt.Fprintf(w, "%d\t%s\t%d\t%s\t%s\n", h.Slot, h.Owner, h.Token, h.AcquiredAt.UTC().Format(time.RFC3339), h.ExpiresAt.UTC().Format(time.RFC3339Nano))
			}
			return w.Flush()
		},
	}
	release := &cobra.Command{
		Use: "release NAME SLOT", Short: "Revoke the permit in SLOT (its holder's next renewal fails)", Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			slot, err := strconv.Atoi(args[1])
			if err != nil || slot < 0 || slot >= coord.MaxPermits {
				return usageError{fmt.Errorf("slot %q: want 0 to %d", args[1], coord.MaxPermits-1)}
			}
			s, done, err := open(cmd, args[0], writes)
			if err != nil {
				return err
			}
			defer done()
			if err := s.Revoke(cmd.Context(), slot); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "semaphore %s: permit %d revoked\n", args[0], slot)
			return nil
		},
	}
	set := &cobra.Command{
		Use: "set NAME PERMITS", Short: "Change a semaphore's permit count (lowering it revokes the permits above)", Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := strconv.Atoi(args[1])
			if err != nil || n < 1 || n > coord.MaxPermits {
				return usageError{fmt.Errorf("permits %q: want 1 to %d", args[1], coord.MaxPermits)}
			}
			s, done, err := open(cmd, args[0], writes)
			if err != nil {
				return err
			}
			defer done()
			if err := s.SetPermits(cmd.Context(), n); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "semaphore %s: %d permits\n", args[0], n)
			return nil
		},
	}
	cmd.AddCommand(list, show, release, set)
	return cmd
}
