package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/coord/jobs"
	"github.com/sqlcoord/sqlcoord/migrate"
	"github.com/sqlcoord/sqlcoord/outbox"
	"github.com/sqlcoord/sqlcoord/session"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

func TestMigrateCLI(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		out, err := runCLI(t, "migrate", "status", "--dsn", env.DSN)
		if err != nil || !strings.Contains(out, "schema version: 0 of") || !strings.Contains(out, "sqlcoord migrate up") {
			t.Fatalf("status before: %v\n%s", err, out)
		}
		t.Setenv("SQLCOORD_DSN", env.DSN) // DSN from the environment
		out, err = runCLI(t, "migrate", "up")
		if err != nil || !strings.Contains(out, "up to date") || !strings.Contains(out, appliedAll()) {
			t.Fatalf("up: %v\n%s", err, out)
		}
		out, err = runCLI(t, "migrate", "up")
		if err != nil || !strings.Contains(out, "nothing to apply") {
			t.Fatalf("up again: %v\n%s", err, out)
		}
		out, err = runCLI(t, "migrate", "status", "--json")
		var ms map[string]any
		if err != nil || json.Unmarshal([]byte(out), &ms) != nil || ms["version"] != ms["latest"] || ms["dirty"] != false {
			t.Fatalf("status --json: %v\n%s", err, out)
		}
		out, err = runCLI(t, "migrate", "version")
		if err != nil || strings.TrimSpace(out) == "0" {
			t.Fatalf("version: %v %q", err, out)
		}
		out, err = runCLI(t, "migrate", "to", "1")
		if err != nil || !strings.Contains(out, "schema version: 1 of") || !strings.Contains(out, "reverted ") {
			t.Fatalf("to 1: %v\n%s", err, out)
		}
		_, err = runCLI(t, "migrate", "down")
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "--yes") {
			t.Fatalf("down without --yes: %v, want a usage error asking for --yes", err)
		}
		_, err = runCLI(t, "migrate", "force", "99")
		if err == nil || !strings.Contains(err.Error(), "not a schema version") {
			t.Fatalf("force 99: %v", err)
		}
		// force only repairs: on a clean schema it is refused (exit 4)
		_, err = runCLI(t, "migrate", "force", "1")
		if !errors.Is(err, migrate.ErrForce) || exitCode(context.Background(), err) != exitUnhealthy || !strings.Contains(err.Error(), "migrate to 1") {
			t.Fatalf("force 1 on a clean schema: %v", err)
		}
		out, err = runCLI(t, "migrate", "down", "--yes")
		if err != nil || !strings.Contains(out, "schema version: 0 of") {
			t.Fatalf("down: %v\n%s", err, out)
		}
	}, dbtest.NoMigrate(), dbtest.Serial())
}

// A CLI that scripts well — usage errors (exit 2) for unknown
// subcommands and bad limits, before any connection; --version.
func TestCLIUsage(t *testing.T) {
	t.Parallel()
	var ue usageError
	for _, args := range [][]string{
		{"migrate", "sideways"}, {"jobs", "nope"}, {"outbox", "nope"}, {"bench", "nope"},
		{"outbox", "dead", "--limit", "-1", "--dsn", "postgres://u@127.0.0.1:1/db"},
		{"outbox", "dead", "--limit", "0", "--dsn", "postgres://u@127.0.0.1:1/db"},
		{"migrate", "down", "--dsn", "postgres://u@127.0.0.1:1/db"},
		{"migrate", "force", "x", "--dsn", "postgres://u@127.0.0.1:1/db"},
		{"console", "--listen", "0.0.0.0:8080", "--dsn", "postgres://u@127.0.0.1:1/db"},
		{"console", "--listen", "nonsense", "--dsn", "postgres://u@127.0.0.1:1/db"},
		{"console", "--token", "short", "--dsn", "postgres://u@127.0.0.1:1/db"},
		{"locks", "protocol", "sideways", "--dsn", "postgres://u@127.0.0.1:1/db"},
		{"bench", "notify", "--rate", "-1"}, {"bench", "notify", "--rate", "NaN"}, {"bench", "notify", "--rate", "1e12"},
		{"bench", "notify", "--relays", "0"},
	} {
		if _, err := runCLI(t, args...); !errors.As(err, &ue) {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
	out, err := runCLI(t, "--version")
	if err != nil || !strings.HasPrefix(out, "sqlcoord ") {
		t.Errorf("--version: %v %q", err, out)
	}
}

func TestCLIErrors(t *testing.T) {
	t.Setenv("SQLCOORD_DSN", "")
	_, err := runCLI(t, "migrate", "status")
	var ue usageError
	if !errors.As(err, &ue) {
		t.Fatalf("no DSN: %v, want a usage error", err)
	}
	_, err = runCLI(t, "migrate", "to", "x", "--dsn", "postgres://h/db")
	if !errors.As(err, &ue) {
		t.Fatalf("bad version: %v", err)
	}
	_, err = runCLI(t, "demo", "no-such-scenario", "--dsn", "postgres://h/db")
	if !errors.As(err, &ue) {
		t.Fatalf("bad scenario: %v", err)
	}
	_, err = runCLI(t, "migrate", "status", "--dsn", "oracle://u:pw1234@h/db")
	if err == nil || !strings.Contains(err.Error(), "unknown scheme") || strings.Contains(err.Error(), "pw1234") {
		t.Fatalf("bad scheme: %v", err)
	}
}

// demoTimeout bounds one run of the demo (about a minute on an idle
// machine).
const demoTimeout = 6 * time.Minute

// The demo is the product's main job: build the real binary and run every
// scenario against both dialect.
func TestDemo(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "sqlcoord")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		// A demo that hangs is sent SIGQUIT after demoTimeout: its
		// goroutines' stacks and what it printed show where it waited
		// (CI once saw it hang on MariaDB until the test binary's timeout,
		// with nothing to read).
		ctx, cancel := context.WithTimeout(context.Background(), demoTimeout)
		defer cancel()
		var buf bytes.Buffer
		cmd := exec.CommandContext(ctx, bin, "demo", "--dsn", env.DSN)
		cmd.Stdout, cmd.Stderr = &buf, &buf
		cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGQUIT) }
		cmd.WaitDelay = 5 * time.Second // then killed
		err := cmd.Run()
		if ctx.Err() != nil {
			t.Fatalf("demo still running after %v; its output and stacks:\n%s", demoTimeout, buf.String())
		}
		if err != nil {
			t.Fatalf("demo: %v\n%s", err, buf.String())
		}
		s := buf.String()
		for _, want := range []string{"errors.Is ErrLocked: true", "lock wait timeout", "killed with SIGKILL", `final row: body="written by B" fence=8`, "ErrStaleToken: true", "1. no lock:                                   200 messages", "(unique claim per slot):     100 messages", "delivered twice 0", "1000 point grants for 1000 orders", "0 pending, 1000 published, 0 dead", "round 3: 1 order created, 9 submissions replayed", "orders: user 1001 1, user 1002 1", "0 duplicates, increasing per goroutine: true", "0 issued twice", "the shard total of each slot is the live members", "shards per process", "total 2000 (was 2000): every transfer moved its amount on both sides or on neither", "refused by the row (ErrStaleToken) ✓", "at most 2 at once ✓"} {
			if !strings.Contains(s, want) {
				t.Errorf("demo output lacks %q:\n%s", want, s)
			}
		}
	}, dbtest.NoMigrate(), dbtest.Serial())
}

func TestJobsCLI(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		runs := jobs.NewRuns(env.DB)
		fire := time.Now().UTC().Add(-time.Hour).Truncate(time.Hour)
		sched, err := jobs.ParseSchedule("0 * * * *", nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := runs.Register(ctx, "report", sched, 1); err != nil {
			t.Fatal(err)
		}
		run, err := runs.Claim(ctx, "report", fire, 0, 1, "me")
		if err != nil {
			t.Fatal(err)
		}
		if err := runs.Finish(ctx, run, errors.New("disk full")); err != nil {
			t.Fatal(err)
		}
		out, err := runCLI(t, "jobs", "list", "--job", "report", "--dsn", env.DSN, "--schedule", "0 * * * *", "--since", "3h")
		if err != nil || !strings.Contains(out, "failed") || !strings.Contains(out, "disk full") || !strings.Contains(out, "NOT SUCCEEDED") {
			t.Fatalf("list: %v\n%s", err, out)
		}
		out, err = runCLI(t, "jobs", "rerun", "--job", "report", "--fire", fire.Format(time.RFC3339Nano), "--dsn", env.DSN)
		if err != nil || !strings.Contains(out, "marked 1") {
			t.Fatalf("rerun: %v\n%s", err, out)
		}
		won, err := runs.TakeOver(ctx, "report", time.Minute, "other")
		if err != nil || len(won) != 1 || won[0].Attempt != 2 {
			t.Fatalf("rerun not picked up: %+v %v", won, err)
		}
		if _, err := runCLI(t, "jobs", "rerun", "--job", "report", "--fire", "yesterday", "--dsn", env.DSN); err == nil {
			t.Fatal("bad --fire accepted")
		}
		// a job nobody registered, and a time the schedule
		// does not produce, are refused (not found, exit 5) and mark nothing
		_, err = runCLI(t, "jobs", "rerun", "--job", "nope", "--fire", fire.Format(time.RFC3339Nano), "--dsn", env.DSN)
		if !errors.Is(err, jobs.ErrUnknownJob) || exitCode(context.Background(), err) != exitNotFound {
			t.Errorf("rerun of an unknown job: %v", err)
		}
		off := fire.Add(7 * time.Minute)
		_, err = runCLI(t, "jobs", "rerun", "--job", "report", "--fire", off.Format(time.RFC3339Nano), "--dsn", env.DSN)
		if !errors.Is(err, jobs.ErrNotOnSchedule) || exitCode(context.Background(), err) != exitNotFound {
			t.Errorf("rerun off the schedule: %v", err)
		}
		if n := dbtest.Count(t, env.DB, `SELECT count(*) FROM coord_job_runs WHERE job <> 'report' OR fire_time <> `+env.DB.Dialect().Placeholder(1), fire); n != 0 {
			t.Errorf("refused reruns left %d rows", n)
		}
		out, err = runCLI(t, "jobs", "list", "--dsn", env.DSN)
		if err != nil || !strings.Contains(out, "report") || !strings.Contains(out, "0 * * * *") {
			t.Errorf("jobs list without --job: %v\n%s", err, out)
		}
		out, err = runCLI(t, "jobs", "list", "--json", "--dsn", env.DSN)
		var defs []map[string]any
		if err != nil || json.Unmarshal([]byte(out), &defs) != nil || len(defs) != 1 || defs[0]["name"] != "report" {
			t.Errorf("jobs list --json: %v\n%s", err, out)
		}
		out, err = runCLI(t, "jobs", "list", "--json", "--job", "report", "--schedule", "0 * * * *", "--since", "3h", "--dsn", env.DSN)
		var runs2 map[string]any
		if err != nil || json.Unmarshal([]byte(out), &runs2) != nil || runs2["job"] != "report" || runs2["runs"] == nil {
			t.Errorf("jobs list --job --json: %v\n%s", err, out)
		}
	})
}

func TestOutboxCLI(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		ob := outbox.New(env.DB)
		ob.EnqueueNow(ctx, outbox.Msg{Topic: "a", Payload: []byte("1")}, outbox.Msg{Topic: "b", Payload: []byte("2")})
		r, _ := outbox.NewRelay(env.DB, outbox.PublisherFunc(func(ctx context.Context, m outbox.Message) error {
			if m.Topic == "b" {
				return outbox.Permanent(errors.New("410 Gone"))
			}
			return nil
		}), outbox.RelayOptions{})
		r.Once(ctx)
		out, err := runCLI(t, "outbox", "stats", "--dsn", env.DSN)
		if err != nil || !strings.Contains(out, "published 1") || !strings.Contains(out, "dead 1") {
			t.Fatalf("stats: %v\n%s", err, out)
		}
		out, err = runCLI(t, "outbox", "dead", "--dsn", env.DSN)
		if err != nil || !strings.Contains(out, "410 Gone") {
			t.Fatalf("dead: %v\n%s", err, out)
		}
		// --json: the same data, machine-readable
		out, err = runCLI(t, "outbox", "stats", "--json", "--dsn", env.DSN)
		var st map[string]float64
		if err != nil || json.Unmarshal([]byte(out), &st) != nil || st["published"] != 1 || st["dead"] != 1 {
			t.Fatalf("stats --json: %v\n%s", err, out)
		}
		out, err = runCLI(t, "outbox", "dead", "--json", "--dsn", env.DSN)
		var dead []map[string]any
		if err != nil || json.Unmarshal([]byte(out), &dead) != nil || len(dead) != 1 || !strings.Contains(fmt.Sprint(dead[0]), "410 Gone") {
			t.Fatalf("dead --json: %v\n%s", err, out)
		}
		out, err = runCLI(t, "outbox", "requeue", "all", "--dsn", env.DSN)
		if err != nil || !strings.Contains(out, "requeued 1") {
			t.Fatalf("requeue: %v\n%s", err, out)
		}
		if _, err := runCLI(t, "outbox", "requeue", "-5", "--dsn", env.DSN); err == nil {
			t.Fatal("bad id accepted")
		}
		if _, err := runCLI(t, "relay", "--publisher", "carrier-pigeon://x", "--dsn", env.DSN); err == nil {
			t.Fatal("unknown publisher accepted")
		}
	})
}

// Sqlcoord sessions stats|revoke --user.
func TestSessionsCLI(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		st, err := session.NewStore(env.DB, session.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range []string{"ann", "ann", "bob"} {
			tx, _ := env.DB.BeginTx(ctx, nil)
			if _, _, err := st.Create(ctx, tx, u, nil); err != nil {
				t.Fatal(err)
			}
			tx.Commit()
		}
		out, err := runCLI(t, "sessions", "stats", "--dsn", env.DSN)
		if err != nil || !strings.Contains(out, "live 3") || !strings.Contains(out, "users 2") {
			t.Fatalf("stats: %v\n%s", err, out)
		}
		var ue usageError
		if _, err := runCLI(t, "sessions", "revoke", "--dsn", env.DSN); !errors.As(err, &ue) {
			t.Fatalf("revoke without --user: %v", err)
		}
		out, err = runCLI(t, "sessions", "revoke", "--user", "ann", "--json", "--dsn", env.DSN)
		var res map[string]any
		if err != nil || json.Unmarshal([]byte(out), &res) != nil || res["revoked"] != float64(2) {
			t.Fatalf("revoke --user ann: %v\n%s", err, out)
		}
		if s, _ := st.Stats(ctx); s.Live != 1 {
			t.Fatalf("after revoke: %+v", s)
		}
	})
}

// appliedAll is what `migrate up` prints on an empty database: every
// migration this build ships.
func appliedAll() string {
	v, _ := sqlcoord.Versions("postgres")
	return fmt.Sprintf("applied %d migration(s): 1 to %d", len(v), v[len(v)-1])
}
