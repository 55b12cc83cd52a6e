package main

import (
	"encoding/json"
	"strings"
	"testing"

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
		for _, want := range []string{"primary (accepts writes)", "schema       at version", "[no ] a failover loses no acknowledged write"} {
			if !strings.Contains(out, want) {
				t.Errorf("doctor output lacks %q:\n%s", want, out)
			}
		}
		if env.Family == "postgres" && !strings.Contains(out, "LISTEN       delivered") {
			t.Errorf("doctor on a direct PostgreSQL: LISTEN not delivered:\n%s", out)
		}
		out, err = runCLI(t, "doctor", "--json", "--dsn", env.DSN)
		var rep doctorReport
		if err != nil || json.Unmarshal([]byte(out), &rep) != nil || rep.Server.Dialect == "" || len(rep.Guarantees) < 3 {
			t.Fatalf("doctor --json: %v\n%s", err, out)
		}
		if env.Family != "postgres" {
			return
		}
		out, err = runCLI(t, "doctor", "--dsn", env.PgBouncer(t, 2)+"&default_query_exec_mode=exec")
		if err != nil || !strings.Contains(out, "LISTEN       lost: a transaction-mode pooler") {
			t.Fatalf("doctor through PgBouncer: %v\n%s", err, out)
		}
	})
}

// Issue 13: doctor on a primary with an asynchronous standby, and on the
// standby itself.
func TestDoctorOnReplicatedPostgres(t *testing.T) {
	t.Parallel()
	cl := dbtest.NewPGCluster(t, false)
	out, err := runCLI(t, "doctor", "--dsn", cl.DSN())
	if err != nil || !strings.Contains(out, "1 standby(s) streaming, 0 synchronous") || !strings.Contains(out, "timeline     1") ||
		!strings.Contains(out, "[yes] fencing tokens, segment ranges and job attempts never go back") {
		t.Fatalf("doctor on the primary: %v\n%s", err, out)
	}
	out, err = runCLI(t, "doctor", "--dsn", cl.StandbyDSN())
	if err != nil || !strings.Contains(out, "hot standby / read-only replica") || !strings.Contains(out, "[no ] locks, leases") {
		t.Fatalf("doctor on the standby: %v\n%s", err, out)
	}
	t.Logf("doctor on the standby:\n%s", out)
}
