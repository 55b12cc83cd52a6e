package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/sqlcoord/sqlcoord/console"
)

func newConsoleCmd() *cobra.Command {
	var listen, token string
	var readOnly bool
	cmd := &cobra.Command{
		Use:   "console",
		Short: "Serve the web console (leases, locks, jobs, outbox, keys, members) on --listen",
		Long: `Serves the web console. On a loopback address (the default, 127.0.0.1:8080) no token is
needed; any other address requires one: --token or $SQLCOORD_CONSOLE_TOKEN (at least 16
characters; the environment keeps it out of the process list). Open the printed address; with a
token, sign in once (or open …/?token=… once: it becomes a cookie).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			addr, err := loopbackDefault(listen)
			if err != nil {
				return usageError{err}
			}
			if token == "" {
				token = os.Getenv("SQLCOORD_CONSOLE_TOKEN")
			}
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelInfo}))
			opt := console.Options{Listen: addr, Token: token, Logger: log, ReadOnly: readOnly}
			if err := opt.Check(); err != nil {
				return usageError{err}
			}
			db, err := openInstalled(cmd, access(readOnly))
			if err != nil {
				return err
			}
			defer db.Close()
			c, err := console.New(db, opt)
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return err
			}
			srv := &http.Server{Handler: c, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
			fmt.Fprintf(cmd.OutOrStdout(), "console on http://%s/ (%s)\n", ln.Addr(), db)
			go func() {
				<-cmd.Context().Done()
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				srv.Shutdown(ctx)
			}()
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:8080", "address to serve on (host:port; off loopback a token is required)")
	cmd.Flags().StringVar(&token, "token", "", "access token (default $SQLCOORD_CONSOLE_TOKEN)")
	cmd.Flags().BoolVar(&readOnly, "read-only", false, "hide and refuse requeue and re-run")
	return cmd
}
