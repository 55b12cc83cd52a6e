package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord/saga"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
	"github.com/sqlcoord/sqlcoord/txn"
)

// sqlcoord saga run|list|show|retry|resolve against an HTTP participant
// whose compensation refuses until it is fixed.
func TestSagaCLI(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		var fixed atomic.Bool
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			c, err := saga.Request(r)
			switch {
			case err != nil:
				http.Error(w, err.Error(), http.StatusBadRequest)
			case c.Branch == "ship" && c.Op == txn.OpAction:
				http.Error(w, "no courier", http.StatusConflict)
			case c.Op == txn.OpCompensate && !fixed.Load():
				http.Error(w, "refund refused: card expired", http.StatusConflict)
			}
		}))
		defer srv.Close()
		c, err := saga.New(env.DB, saga.Options{})
		if err != nil {
			t.Fatal(err)
		}
		var gid string
		err = txn.Do(ctx, env.DB, txn.Options{}, func(ctx context.Context, tx *sql.Tx) error {
			gid, err = c.Begin(ctx, tx, saga.Global{GID: "order-7", Mode: saga.ModeSaga, Branches: []saga.Branch{
				{Name: "charge", Target: srv.URL + "/charge?currency=EUR"}, {Name: "ship", Target: srv.URL + "/ship"}}})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		out, err := runCLI(t, "saga", "run", "--once", "--dsn", env.DSN)
		if err != nil || !strings.Contains(out, "drove 1") {
			t.Fatalf("run --once: %v\n%s", err, out)
		}
		out, err = runCLI(t, "saga", "list", "--filter", "stuck", "--dsn", env.DSN)
		if err != nil || !strings.Contains(out, "order-7") || !strings.Contains(out, "STUCK") || !strings.Contains(out, "card expired") {
			t.Fatalf("list: %v\n%s", err, out)
		}
		out, err = runCLI(t, "saga", "show", gid, "--dsn", env.DSN)
		if err != nil || !strings.Contains(out, "compensating (STUCK)") || !strings.Contains(out, "no courier") || strings.Contains(out, "currency=EUR") {
			t.Fatalf("show: %v\n%s", err, out)
		}
		out, err = runCLI(t, "saga", "show", gid, "--json", "--dsn", env.DSN)
		var in saga.Info
		if err != nil || json.Unmarshal([]byte(out), &in) != nil || !in.Stuck || len(in.Branches) != 2 {
			t.Fatalf("show --json: %v\n%s", err, out)
		}
		fixed.Store(true)
		if out, err := runCLI(t, "saga", "retry", gid, "--dsn", env.DSN); err != nil {
			t.Fatalf("retry: %v\n%s", err, out)
		}
		runCLI(t, "saga", "run", "--once", "--dsn", env.DSN)
		if in, _ := saga.Get(ctx, env.DB, gid); in.Status != saga.Aborted {
			t.Fatalf("after retry: %+v", in)
		}
		for _, args := range [][]string{{"resolve", gid}, {"list", "--filter", "odd"}, {"show", "g\xff"}} {
			if _, err := runCLI(t, append(append([]string{"saga"}, args...), "--dsn", env.DSN)...); exitCode(ctx, err) != exitUsage {
				t.Errorf("%v: %v, want a usage error", args, err)
			}
		}
		if _, err := runCLI(t, "saga", "retry", "nope", "--dsn", env.DSN); exitCode(ctx, err) != exitNotFound {
			t.Errorf("retry nope: %v", err)
		}
		if _, err := runCLI(t, "saga", "resolve", gid, "--reason", "x", "--dsn", env.DSN); !errors.Is(err, saga.ErrNotStuck) {
			t.Errorf("resolve of an ended transaction: %v", err)
		}
	})
}

// `sqlcoord saga run` holds a transaction whose participant hangs; on
// SIGTERM it stops with status 0 and releases its claim, so that another
// driver goes on at once instead of after the lease.
func TestSagaRunStopsOnSIGTERM(t *testing.T) {
	t.Parallel()
	bin := buildCLI(t)
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		entered := make(chan struct{}, 16)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			entered <- struct{}{}
			<-r.Context().Done() // hangs until the driver gives up
		}))
		defer srv.Close()
		c, _ := saga.New(env.DB, saga.Options{})
		err := txn.Do(ctx, env.DB, txn.Options{}, func(ctx context.Context, tx *sql.Tx) error {
			_, err := c.Begin(ctx, tx, saga.Global{GID: "slow-1", Mode: saga.ModeSaga, Branches: []saga.Branch{{Name: "a", Target: srv.URL}}})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "saga", "run", "--dsn", env.DSN, "--lease", "5m", "--call-timeout", "4m")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer cmd.Process.Kill()
		select {
		case <-entered:
		case <-time.After(30 * time.Second):
			t.Fatal("the driver did not call the branch")
		}
		sigtermAndWait(t, cmd, 10*time.Second)
		in, err := saga.Get(ctx, env.DB, "slow-1")
		if err != nil || in.Status != saga.Running || in.DueIn > time.Second {
			t.Fatalf("after SIGTERM: %+v %v (want running and due now, not after the 5 min lease)", in, err)
		}
	})
}
