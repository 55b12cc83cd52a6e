package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

// Doctor reports what it detects, on both dialects, directly and
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

// Doctor on a primary with an asynchronous standby, and on the
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
	// the standby's own view, not a primary's
	for _, want := range []string{"replication  a standby: WAL receiver streaming", "timeline     none here", "LISTEN       not tested: a standby"} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor on the standby lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "synchronous_standby_names") {
		t.Errorf("doctor on the standby shows a primary's replication view:\n%s", out)
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

// Doctor as a role that may not read sqlcoord's tables lists
// every fact it could not read (schema, forks) and says the epoch is
// unknown, instead of dropping those lines; it exits 3.
func TestDoctorWithoutReadRights(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		s := env.Server
		user := "noread_" + env.Name
		if len(user) > 32 {
			user = user[:32]
		}
		var dsn string
		if env.Family == "postgres" {
			dbtest.Exec(t, env.DB, `CREATE ROLE "`+user+`" LOGIN`)
			dsn = fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", user, s.Host, s.Port, env.Name)
		} else {
			dbtest.Exec(t, env.DB, fmt.Sprintf("CREATE USER IF NOT EXISTS '%s'@'%%' IDENTIFIED BY 'pw'", user))
			dbtest.Exec(t, env.DB, fmt.Sprintf("GRANT SELECT ON `%s`.coord_locks TO '%s'@'%%'", env.Name, user))
			dsn = fmt.Sprintf("mysql://%s:pw@tcp(%s:%d)/%s", user, s.Host, s.Port, env.Name)
		}
		out, err := runCLI(t, "doctor", "--dsn", dsn)
		if code := exitCode(context.Background(), err); code != exitUnread {
			t.Fatalf("doctor without read rights: exit %d (%v), want %d\n%s", code, err, exitUnread, out)
		}
		for _, want := range []string{"epoch        unknown", "schema       unknown"} {
			if !strings.Contains(out, want) {
				t.Errorf("doctor output lacks %q:\n%s", want, out)
			}
		}
		out, _ = runCLI(t, "doctor", "--json", "--dsn", dsn)
		var rep doctorReport
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("doctor --json: %v\n%s", err, out)
		}
		for _, fact := range []string{"schema", "forks"} {
			if !slices.ContainsFunc(rep.Unread, func(f doctorFact) bool { return f.Fact == fact }) {
				t.Errorf("doctor --json: %q not listed under unread: %+v", fact, rep.Unread)
			}
		}
		for _, g := range rep.Guarantees {
			if g.Name == "epochs" && g.Status != unknown {
				t.Errorf("epochs guarantee %q without the forks read: %+v", g.Status, g)
			}
		}
	})
}
