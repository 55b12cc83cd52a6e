package main

import (
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sqlcoord/sqlcoord/coord"
	"github.com/sqlcoord/sqlcoord/internal/valid"
)

// leaderJSON is a leader as the CLI prints it with --json.
type leaderJSON struct {
	Election  string    `json:"election"`
	ID        string    `json:"id"`
	Term      int64     `json:"term"`
	Value     string    `json:"value"`
	Since     time.Time `json:"since"`
	ExpiresAt time.Time `json:"expires_at"`
	Live      bool      `json:"live"`
}

func leaderView(l coord.Leader) leaderJSON {
	return leaderJSON{Election: l.Election, ID: l.ID, Term: l.Term, Value: l.Value, Since: l.Since, ExpiresAt: l.ExpiresAt, Live: l.Live}
}

// waiterJSON is one wait in a queue, the head first.
type waiterJSON struct {
	Position int       `json:"position"`
	Owner    string    `json:"owner"`
	Client   string    `json:"client"`
	Since    time.Time `json:"since"`
	Live     bool      `json:"live"`
}

func waitersView(ws []coord.Waiter) []waiterJSON {
	out := make([]waiterJSON, 0, len(ws))
	for i, w := range ws {
		out = append(out, waiterJSON{Position: i + 1, Owner: w.Owner, Client: w.Client, Since: w.Since, Live: w.Live})
	}
	return out
}

// printWaiters prints a queue's waits, the head first.
func printWaiters(cmd *cobra.Command, ws []waiterJSON) error {
	if len(ws) == 0 {
		fmt.Fprintln(cmd.OutOrStdout(), "waiting: none")
		return nil
	}
	fmt.Fprintf(cmd.OutOrStdout(), "waiting, in queue order (%d):\n", len(ws))
	w := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', 0)
	fmt.Fprintln(w, "#\tOWNER\tCLIENT\tSINCE (UTC)\tLIVE")
	for _, x := range ws {
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%v\n", x.Position, x.Owner, x.Client, x.Since.UTC().Format(time.RFC3339Nano), x.Live)
	}
	return w.Flush()
}

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
			views := make([]leaderJSON, 0, len(ls))
			for _, l := range ls {
				views = append(views, leaderView(l))
			}
			if done, err := printJSON(cmd, views); done || err != nil {
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
		Use: "show NAME", Short: "Show an election's current leader and the candidates waiting, in queue order", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			e, done, err := openElection(cmd, args[0], reads)
			if err != nil {
				return err
			}
			defer done()
			l, err := e.Leader(cmd.Context())
			if err != nil && !errors.Is(err, coord.ErrNoLeader) {
				return err
			}
			ws, werr := e.Waiters(cmd.Context())
			if werr != nil {
				return werr
			}
			if err != nil && l.Term == 0 && len(ws) == 0 {
				return notFound(fmt.Errorf("leader show: no election %s: nobody ever led it or waits in it", valid.Quote(args[0])))
			}
			var leader *leaderJSON
			if err == nil {
				v := leaderView(l)
				leader = &v
			}
			view := struct {
				Election string       `json:"election"`
				Leader   *leaderJSON  `json:"leader"`
				Waiters  []waiterJSON `json:"waiters"`
			}{args[0], leader, waitersView(ws)}
			if done, err := printJSON(cmd, view); done || err != nil {
				return err
			}
			if leader == nil {
				fmt.Fprintf(cmd.OutOrStdout(), "election %s: no leader (term %d ended)\n", args[0], l.Term)
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "election %s: leader %s, term %d, since %s, expires %s\nvalue: %s\n",
					l.Election, l.ID, l.Term, l.Since.UTC().Format(time.RFC3339), l.ExpiresAt.UTC().Format(time.RFC3339Nano), l.Value)
			}
			return printWaiters(cmd, view.Waiters)
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
			if done, err := printJSON(cmd, leaderView(l)); done || err != nil {
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
			type semJSON struct {
				Name      string    `json:"name"`
				Permits   int       `json:"permits"`
				Held      int       `json:"held"`
				UpdatedAt time.Time `json:"updated_at"`
			}
			views := make([]semJSON, 0, len(ss))
			for _, s := range ss {
				views = append(views, semJSON{s.Name, s.Permits, s.Held, s.UpdatedAt})
			}
			if done, err := printJSON(cmd, views); done || err != nil {
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
	// known refuses a semaphore that has no permit count recorded (a
	// mistyped name) with exit 5.
	known := func(cmd *cobra.Command, s *coord.Semaphore[*sql.Tx], what string) (coord.SemaphoreInfo, error) {
		info, err := s.Info(cmd.Context())
		if err != nil {
			return info, err
		}
		if info.Permits == 0 {
			return info, notFound(fmt.Errorf("semaphore %s: no semaphore %s: no permit count recorded (a mistyped name? a semaphore's first use records it)", what, valid.Quote(s.Name())))
		}
		return info, nil
	}
	show := &cobra.Command{
		Use: "show NAME", Short: "Show a semaphore's holders and its waiters, in queue order", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, done, err := open(cmd, args[0], reads)
			if err != nil {
				return err
			}
			defer done()
			info, err := known(cmd, s, "show")
			if err != nil {
				return err
			}
			hs, err := s.Holders(cmd.Context())
			if err != nil {
				return err
			}
			ws, err := s.Waiters(cmd.Context())
			if err != nil {
				return err
			}
			type holderJSON struct {
				Slot       int       `json:"slot"`
				Owner      string    `json:"owner"`
				Token      int64     `json:"token"`
				AcquiredAt time.Time `json:"acquired_at"`
				ExpiresAt  time.Time `json:"expires_at"`
			}
			holders := make([]holderJSON, 0, len(hs))
			for _, h := range hs {
				holders = append(holders, holderJSON{h.Slot, h.Owner, h.Token, h.AcquiredAt, h.ExpiresAt})
			}
			view := struct {
				Name    string       `json:"name"`
				Permits int          `json:"permits"`
				Holders []holderJSON `json:"holders"`
				Waiters []waiterJSON `json:"waiters"`
			}{info.Name, info.Permits, holders, waitersView(ws)}
			if ok, err := printJSON(cmd, view); ok || err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "semaphore %s: %d permits, %d held\n", info.Name, info.Permits, len(hs))
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', 0)
			fmt.Fprintln(w, "SLOT\tOWNER\tTOKEN\tACQUIRED (UTC)\tEXPIRES (UTC)")
			for _, h := range hs {
				fmt.Fprintf(w, "%d\t%s\t%d\t%s\t%s\n", h.Slot, h.Owner, h.Token, h.AcquiredAt.UTC().Format(time.RFC3339), h.ExpiresAt.UTC().Format(time.RFC3339Nano))
			}
			if err := w.Flush(); err != nil {
				return err
			}
			return printWaiters(cmd, view.Waiters)
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
			if _, err := known(cmd, s, "release"); err != nil {
				return err
			}
			if err := s.Revoke(cmd.Context(), slot); err != nil {
				return err
			}
			if ok, err := printJSON(cmd, map[string]any{"name": args[0], "slot": slot, "revoked": true}); ok || err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "semaphore %s: permit %d revoked\n", args[0], slot)
			return nil
		},
	}
	var create bool
	set := &cobra.Command{
		Use: "set NAME PERMITS", Short: "Change a semaphore's permit count (lowering it revokes the permits above); --create for a new one", Args: cobra.ExactArgs(2),
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
			if !create {
				if _, err := known(cmd, s, "set"); err != nil {
					return err
				}
			}
			if err := s.SetPermits(cmd.Context(), n); err != nil {
				return err
			}
			if ok, err := printJSON(cmd, map[string]any{"name": args[0], "permits": n}); ok || err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "semaphore %s: %d permits\n", args[0], n)
			return nil
		},
	}
	set.Flags().BoolVar(&create, "create", false, "record the count of a semaphore never used yet (without it a name with no count recorded is refused, exit 5)")
	cmd.AddCommand(list, show, release, set)
	return cmd
}
