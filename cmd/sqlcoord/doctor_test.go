package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/internal/dbtest"
)

// Issue 13: doctor reports what it detects, on both dialects, directly and
// through a transaction-mode PgBouncer (where LISTEN is lost), in text and
// JSON, without the password.
func TestDoctorCLI(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		out, err := runCLI(t, "doctor", "--dsn", env.DSN)
		if err != nil {
			t.Fatalf("doctor: %v\n%s", err, out)
		}
		for _, want := range []string{"primary (accepts writes)", "schema       at version", "[no ] a failover loses no acknowledged write", "verdict      healthy"} {
			if !strings.Contains(out, want) {
				t.Errorf("doctor output lacks %q:\n%s", want, out)
			}
		}
		if env.Family == "postgres" && !strings.Contains(out, "LISTEN       delivered") {
			t.Errorf("doctor on a direct PostgreSQL: LISTEN not delivered:\n%s", out)
		}
		out, err = runCLI(t, "doctor", "--json", "--dsn", env.DSN)
		var rep doctorReport
		if err != nil || json.Unmarshal([]byte(out), &rep) != nil || rep.Server == nil || rep.Server.Dialect == "" || len(rep.Guarantees) < 3 || rep.ExitCode != 0 {
			t.Fatalf("doctor --json: %v\n%s", err, out)
		}
		if env.Family != "postgres" {
			return
		}
		// through PgBouncer without any exec-mode setting: the pooler is
		// detected, every fact is read, and LISTEN is lost (exit 0 unless
		// --require listen)
		bouncer := env.PgBouncer(t, 2)
		out, err = runCLI(t, "doctor", "--dsn", bouncer)
		if err != nil || !strings.Contains(out, "LISTEN       lost: a transaction-mode pooler") || strings.Contains(out, "unread") || strings.Contains(out, "prepared statement") {
			t.Fatalf("doctor through PgBouncer: %v\n%s", err, out)
		}
		out, err = runCLI(t, "doctor", "--require", "listen", "--dsn", bouncer)
		if exitCode(context.Background(), err) != exitUnhealthy {
			t.Fatalf("doctor --require listen through PgBouncer: %v, want exit 4\n%s", err, out)
		}
	})
}

// Issue 13: doctor on a primary with an asynchronous standby, and on the
// standby itself.
func TestDoctorOnReplicatedPostgres(t *testing.T) {
	t.Parallel()
	cl := dbtest.NewPGCluster(t, false)
	out, err := runCLI(t, "doctor", "--dsn", cl.DSN())
	if exitCode(context.Background(), err) != exitUnhealthy || !strings.Contains(out, "*[no ] sqlcoord's schema is installed") {
		t.Fatalf("doctor on a primary without the schema: %v, want exit 4\n%s", err, out)
	}
	if _, err := runCLI(t, "migrate", "up", "--dsn", cl.DSN()); err != nil {
		t.Fatal(err)
	}
	cl.WaitCaughtUp(t)
	out, err = runCLI(t, "doctor", "--dsn", cl.DSN())
	if err != nil || !strings.Contains(out, "1 standby(s) streaming, 0 synchronous") || !strings.Contains(out, "timeline     1") ||
		!strings.Contains(out, "[yes] fencing tokens, segment ranges and job attempts never go back") {
		t.Fatalf("doctor on the primary: %v\n%s", err, out)
	}
	out, err = runCLI(t, "doctor", "--dsn", cl.StandbyDSN())
	if exitCode(context.Background(), err) != exitUnhealthy || !strings.Contains(out, "hot standby / read-only replica") || !strings.Contains(out, "*[no ] locks, leases") {
		t.Fatalf("doctor on the standby: %v, want exit 4\n%s", err, out)
	}
	// read-only commands work on the standby, without noise
	out, err = runCLI(t, "outbox", "stats", "--dsn", cl.StandbyDSN())
	if err != nil || !strings.Contains(out, "pending 0") {
		t.Fatalf("outbox stats on the standby: %v\n%s", err, out)
	}
	for _, args := range [][]string{{"migrate", "status"}, {"jobs", "list"}, {"sessions", "stats"}, {"epoch"}, {"outbox", "dead"}} {
		if out, err := runCLI(t, append(args, "--dsn", cl.StandbyDSN())...); err != nil {
			t.Errorf("%v on the standby: %v\n%s", args, err, out)
		}
	}
	// a writing command is refused, saying why once, exit 4
	_, err = runCLI(t, "outbox", "requeue", "all", "--dsn", cl.StandbyDSN())
	if !errors.Is(err, sqlcoord.ErrReadOnly) || exitCode(context.Background(), err) != exitUnhealthy || strings.Contains(err.Error(), "tls") {
		t.Fatalf("requeue on the standby: %v", err)
	}
	t.Logf("doctor on the standby:\n%s", out)
}
