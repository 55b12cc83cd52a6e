package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord/coord"
	"github.com/sqlcoord/sqlcoord/coord/jobs"
	"github.com/sqlcoord/sqlcoord/outbox"
	"github.com/sqlcoord/sqlcoord/saga"
	"github.com/sqlcoord/sqlcoord/session"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

var update = flag.Bool("update", false, "rewrite the --json golden files in testdata/json")

// shape is a JSON document's structure: every key, each value's type, a
// list's element shape ("[]" for an empty list).
func shape(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, x := range v {
			out[k] = shape(x)
		}
		return out
	case []any:
		if len(v) == 0 {
			return "[]"
		}
		return []any{shape(v[0])}
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "bool"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

var snake = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// keysOf lists every key in v that is not snake_case, and every list
// printed as null (an empty list is []).
func badKeys(v any, path string, nullable map[string]bool) []string {
	var bad []string
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if !snake.MatchString(k) {
				bad = append(bad, path+"."+k+": not snake_case")
			}
			if v[k] == nil && !nullable[k] {
				bad = append(bad, path+"."+k+": null")
			}
			bad = append(bad, badKeys(v[k], path+"."+k, nullable)...)
		}
	case []any:
		for i, x := range v {
			bad = append(bad, badKeys(x, fmt.Sprintf("%s[%d]", path, i), nullable)...)
		}
	}
	return bad
}

// One JSON convention for every --json command: snake_case keys, [] for
// an empty list, and a structure pinned by a golden file per command
// (go test -run TestJSONGolden -update rewrites them).
func TestJSONGolden(t *testing.T) {
	t.Parallel()
	// values that may be null: a time not reached yet, a fact not read
	nullable := map[string]bool{"started_at": true, "heartbeat_at": true, "finished_at": true, "retry_at": true, "server": true, "schema": true, "leader": true}
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		dsn := []string{"--json", "--dsn", env.DSN}
		golden := func(name string, args ...string) {
			t.Helper()
			out, err := runCLI(t, append(args, dsn...)...)
			var ee exitError
			if err != nil && !errors.As(err, &ee) {
				t.Errorf("%s: %v\n%s", name, err, out)
				return
			}
			var doc any
			if err := json.Unmarshal([]byte(out), &doc); err != nil {
				t.Errorf("%s: not JSON: %v\n%s", name, err, out)
				return
			}
			for _, b := range badKeys(doc, name, nullable) {
				t.Errorf("%s", b)
			}
			got, _ := json.MarshalIndent(shape(doc), "", "  ")
			got = append(got, '\n')
			file := filepath.Join("testdata", "json", name+"."+env.Family+".json")
			if *update {
				os.MkdirAll(filepath.Dir(file), 0o755)
				if err := os.WriteFile(file, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Errorf("%s: %v (run with -update)", name, err)
				return
			}
			if string(want) != string(got) {
				t.Errorf("%s: the structure changed:\n--- %s\n%s\n--- now\n%s", name, file, want, got)
			}
		}
		// empty lists first
		golden("jobs_list_empty", "jobs", "list")
		golden("outbox_dead_empty", "outbox", "dead")
		golden("saga_list_empty", "saga", "list")
		// then some of everything
		runs := jobs.NewRuns(env.DB)
		sched, _ := jobs.ParseSchedule("0 * * * *", nil)
		fire := time.Now().UTC().Add(-time.Hour).Truncate(time.Hour)
		if err := runs.Register(ctx, "report", sched, 1); err != nil {
			t.Fatal(err)
		}
		early, err := runs.Claim(ctx, "report", fire.Add(-time.Hour), 0, 1, "me") // the first run listed: waiting to retry
		if err != nil {
			t.Fatal(err)
		}
		if _, err := runs.Fail(ctx, early, errors.New("timeout"), jobs.Retry{MaxAttempts: 3, BaseBackoff: time.Hour}); err != nil {
			t.Fatal(err)
		}
		run, err := runs.Claim(ctx, "report", fire, 0, 1, "me")
		if err != nil {
			t.Fatal(err)
		}
		runs.Finish(ctx, run, errors.New("disk full"))
		ob := outbox.New(env.DB)
		ob.EnqueueNow(ctx, outbox.Msg{Topic: "b", Payload: []byte("2")})
		r, _ := outbox.NewRelay(env.DB, outbox.PublisherFunc(func(context.Context, outbox.Message) error {
			return outbox.Permanent(errors.New("410 Gone"))
		}), outbox.RelayOptions{})
		r.Once(ctx)
		st, _ := session.NewStore(env.DB, session.Options{})
		tx, _ := env.DB.BeginTx(ctx, nil)
		st.Create(ctx, tx, "ann", nil)
		tx.Commit()

		c, _ := saga.New(env.DB, saga.Options{})
		tx, _ = env.DB.BeginTx(ctx, nil)
		c.Begin(ctx, tx, saga.Global{GID: "order-1", Mode: saga.ModeSaga, Branches: []saga.Branch{{Name: "a", Target: "unregistered"}}})
		tx.Commit()
		c.RunDue(ctx)

		if env.Family == "postgres" { // a slot, so doctor's "slots" list is in its structure
			slot := outbox.SlotName("golden", env.Name)
			if _, err := env.DB.Executor().Exec(ctx, `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, slot); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { env.DB.Executor().Exec(context.Background(), `SELECT pg_drop_replication_slot($1)`, slot) })
		}
		// an election with a leader and a candidate waiting; a semaphore
		// with a holder and a waiter
		cl := coord.New(env.DB)
		wctx, stopWaiting := context.WithCancel(ctx)
		defer stopWaiting()
		el, _ := cl.Election("golden", coord.ElectionOptions{ID: "leader", TTL: time.Minute})
		if _, err := el.Campaign(ctx, "value"); err != nil {
			t.Fatal(err)
		}
		follower, _ := coord.New(env.DB).Election("golden", coord.ElectionOptions{ID: "follower", TTL: time.Minute})
		go follower.Campaign(wctx, "")
		sem, _ := cl.Semaphore("golden", 1)
		if _, err := sem.TryAcquire(ctx, "holder", time.Minute); err != nil {
			t.Fatal(err)
		}
		go sem.Acquire(wctx, "waiter", time.Minute)
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			a, _ := el.Waiters(ctx)
			b, _ := sem.Waiters(ctx)
			if len(a) == 1 && len(b) == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the waiters did not queue")
			}
		}
		golden("leader_list", "leader", "list")
		golden("leader_show", "leader", "show", "golden")
		golden("semaphore_list", "semaphore", "list")
		golden("semaphore_show", "semaphore", "show", "golden")
		golden("semaphore_set", "semaphore", "set", "golden", "2")
		golden("leader_resign", "leader", "resign", "golden")
		golden("doctor", "doctor")
		golden("saga_list", "saga", "list", "--filter", "all")
		golden("saga_show", "saga", "show", "order-1")
		golden("migrate_status", "migrate", "status")
		golden("migrate_version", "migrate", "version")
		golden("migrate_up", "migrate", "up")
		golden("version", "version")
		golden("jobs_list", "jobs", "list")
		golden("jobs_list_job", "jobs", "list", "--job", "report", "--schedule", "0 * * * *", "--since", "3h")
		golden("outbox_stats", "outbox", "stats")
		golden("outbox_dead", "outbox", "dead")
		golden("outbox_requeue", "outbox", "requeue", "all")
		golden("sessions_stats", "sessions", "stats")
		golden("sessions_revoke", "sessions", "revoke", "--user", "ann")
		golden("epoch", "epoch")
		if env.Family == "postgres" {
			golden("locks_protocol", "locks", "protocol")
		}
	})
}
