package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/outbox"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
	"github.com/sqlcoord/sqlcoord/txn"
)

// sqlcoord cleanup: the library's cleanups from the command line — what is
// finished and old goes, what is pending or new stays, each table reports.
func TestCleanupCLI(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		ob := outbox.New(env.DB)
		if err := ob.EnqueueNow(ctx, outbox.Msg{Topic: "a", Payload: []byte("1")}, outbox.Msg{Topic: "a", Payload: []byte("2")}); err != nil {
			t.Fatal(err)
		}
		r, err := outbox.NewRelay(env.DB, outbox.PublisherFunc(func(context.Context, outbox.Message) error { return nil }), outbox.RelayOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Once(ctx); err != nil {
			t.Fatal(err)
		}
		// published after the relay ran: pending, never a cleanup's
		if err := ob.EnqueueNow(ctx, outbox.Msg{Topic: "a", Payload: []byte("3")}); err != nil {
			t.Fatal(err)
		}
		keys := txn.NewKeys(env.DB, txn.KeysOptions{})
		tx, err := env.DB.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := keys.Record(ctx, tx, "cli", "done-1", nil, []byte("ok")); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if _, err := keys.Start(ctx, "cli", "pending-1", nil); err != nil { // pending: never deleted
			t.Fatal(err)
		}

		t.Run("what is newer than --older-than stays", func(t *testing.T) {
			out, err := runCLI(t, "cleanup", "--older-than", "1h", "--json", "--dsn", env.DSN)
			var rep struct {
				Deleted int64
				Tables  []cleanupResult
			}
			if err != nil || json.Unmarshal([]byte(out), &rep) != nil || rep.Deleted != 0 || len(rep.Tables) != len(cleanupTables) {
				t.Fatalf("cleanup --older-than 1h: %v\n%s", err, out)
			}
		})
		t.Run("finished rows go, pending ones stay", func(t *testing.T) {
			time.Sleep(20 * time.Millisecond) // everything finished is older than 10 ms
			out, err := runCLI(t, "cleanup", "--older-than", "10ms", "--tables", "outbox,keys", "--duty", "0", "--batch", "1", "--dsn", env.DSN)
			if err != nil {
				t.Fatalf("cleanup: %v\n%s", err, out)
			}
			fields := map[string]string{}
			for _, l := range strings.Split(out, "\n") {
				if f := strings.Fields(l); len(f) >= 2 {
					fields[f[0]] = f[1]
				}
			}
			if fields["outbox"] != "2" || fields["keys"] != "1" || fields["total"] != "3" || fields["inbox"] != "" {
				t.Fatalf("want outbox 2, keys 1, total 3 and no other table:\n%s", out)
			}
			st, err := ob.Stats(ctx)
			if err != nil || st.Pending != 1 || st.Published != 0 {
				t.Fatalf("outbox after cleanup: %+v, %v; want the pending message kept", st, err)
			}
			// the pending key is still there: a second Start is in progress
			if _, err := keys.Start(ctx, "cli", "pending-1", nil); !errors.Is(err, txn.ErrInProgress) {
				t.Fatalf("Start of the pending key after cleanup: %v, want ErrInProgress", err)
			}
			// the done key is gone: the same request would run again
			if c, err := keys.Start(ctx, "cli", "done-1", nil); err != nil || c.Replay {
				t.Fatalf("Start of the cleaned key: %+v, %v; want a fresh claim", c, err)
			}
		})
		t.Run("a database without the schema is refused", func(t *testing.T) {
			bare := dbtest.New(t, env.Family, dbtest.NoMigrate())
			_, err := runCLI(t, "cleanup", "--older-than", "1h", "--dsn", bare.DSN)
			if !errors.Is(err, sqlcoord.ErrNoSchema) || exitCode(context.Background(), err) != exitUnhealthy {
				t.Fatalf("cleanup on a bare database: %v, want the schema named", err)
			}
		})
	})
}
