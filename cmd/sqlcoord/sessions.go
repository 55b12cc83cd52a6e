package main

import (
	"database/sql"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sqlcoord/sqlcoord/session"
)

func newSessionsCmd() *cobra.Command {
	cmd := groupCmd("sessions", "Inspect and revoke web sessions (coord_sessions)")
	withStore := func(a access, fn func(cmd *cobra.Command, st *session.Store[*sql.Tx]) error) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, _ []string) error {
			db, err := openDB(cmd, a)
			if err != nil {
				return err
			}
			defer db.Close()
			st, err := session.NewStore(db, session.Options{})
			if err != nil {
				return err
			}
			return fn(cmd, st)
		}
	}
	var user string
	revoke := &cobra.Command{Use: "revoke", Short: "End every session of a user (log out everywhere)", Args: cobra.NoArgs,
		PreRunE: func(*cobra.Command, []string) error {
			if user == "" {
				return usageError{errors.New("--user is required")}
			}
			return nil
		},
		RunE: withStore(writes, func(cmd *cobra.Command, st *session.Store[*sql.Tx]) error {
			n, err := st.RevokeAllForUser(cmd.Context(), user)
			if errors.Is(err, session.ErrInvalid) {
				return usageError{err}
			}
			if err != nil {
				return err
			}
			if done, err := printJSON(cmd, map[string]any{"user": user, "revoked": n}); done || err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "revoked %d session(s) of %s\n", n, user)
			return nil
		})}
	revoke.Flags().StringVar(&user, "user", "", "user id whose sessions end")
	cmd.AddCommand(
		&cobra.Command{Use: "stats", Short: "Live sessions, users and expired rows (database clock)", Args: cobra.NoArgs,
			RunE: withStore(reads, func(cmd *cobra.Command, st *session.Store[*sql.Tx]) error {
				s, err := st.Stats(cmd.Context())
				if err != nil {
					return err
				}
				if done, err := printJSON(cmd, map[string]any{"live": s.Live, "users": s.Users, "expired": s.Expired}); done || err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "live %d\nusers %d\nexpired %d\n", s.Live, s.Users, s.Expired)
				return nil
			})},
		revoke,
	)
	return cmd
}
