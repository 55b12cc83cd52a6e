package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

// exitOf runs the real binary and returns its exit status and output.
func exitOf(t *testing.T, bin string, env []string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "SQLCOORD_DSN=", "SQLCOORD_POOLER=")
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), string(out)
	}
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return 0, string(out)
}

// The exit statuses docs/cli.md promises, command by command, with the
// real binary: usage errors exit 2 before connecting (an unreachable DSN
// would exit 1), a database that is not ready 4, a name it does not know
// 5, a failure 1.
func TestExitCodeMatrix(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildCLI(t)
	const nowhere = "postgres://u@127.0.0.1:1/db?connect_timeout=2"
	for _, c := range []struct {
		args []string
		env  []string
		want int
	}{
		{args: []string{"--version"}, want: exitOK},
		{args: []string{"nope"}, want: exitUsage},
		{args: []string{"migrate", "sideways", "--dsn", nowhere}, want: exitUsage},
		{args: []string{"migrate", "force", "--dsn", nowhere}, want: exitUsage},
		{args: []string{"migrate", "force", "x", "--dsn", nowhere}, want: exitUsage},
		{args: []string{"migrate", "to", "--dsn", nowhere}, want: exitUsage},
		{args: []string{"migrate", "down", "--dsn", nowhere}, want: exitUsage},
		{args: []string{"migrate", "status"}, want: exitUsage}, // no DSN at all
		{args: []string{"migrate", "status", "--dsn", "oracle://u@h/db"}, want: exitUsage},
		// a mistyped MySQL DSN is a bad argument, named as one
		{args: []string{"migrate", "status", "--dsn", "mysql://u@tcp(127.0.0.1:1/db"}, want: exitUsage},
		// a group alone is an incomplete command line
		{args: []string{"migrate"}, want: exitUsage},
		{args: []string{"jobs"}, want: exitUsage},
		{args: []string{"locks"}, want: exitUsage},
		{args: []string{"outbox", "--json"}, want: exitUsage},
		{args: []string{"migrate", "status", "--dsn", nowhere}, want: exitFailed},
		{args: []string{"migrate", "status", "--dsn", nowhere}, env: []string{"SQLCOORD_POOLER=maybe"}, want: exitUsage},
		{args: []string{"outbox", "requeue", "--dsn", nowhere}, want: exitUsage},
		{args: []string{"outbox", "requeue", "-5", "--dsn", nowhere}, want: exitUsage},
		{args: []string{"outbox", "requeue", "x", "--dsn", nowhere}, want: exitUsage},
		{args: []string{"outbox", "dead", "--limit", "0", "--dsn", nowhere}, want: exitUsage},
		{args: []string{"jobs", "rerun", "--dsn", nowhere}, want: exitUsage},
		{args: []string{"jobs", "rerun", "--job", "nope", "--dsn", nowhere}, want: exitUsage},
		{args: []string{"jobs", "rerun", "--job", "nope", "--fire", "yesterday", "--dsn", nowhere}, want: exitUsage},
		{args: []string{"jobs", "rerun", "--job", "bad\xffname", "--fire", "2026-01-01T00:00:00Z", "--dsn", nowhere}, want: exitUsage},
		{args: []string{"jobs", "list", "--schedule", "every tuesday", "--dsn", nowhere}, want: exitUsage},
		{args: []string{"relay", "--listen", "nonsense", "--dsn", nowhere}, want: exitUsage},
		{args: []string{"relay", "--publisher", "carrier-pigeon://x", "--dsn", nowhere}, want: exitUsage},
		{args: []string{"relay", "--listen-notify", "sometimes", "--dsn", nowhere}, want: exitUsage},
		{args: []string{"relay", "--listen", "59090", "--dsn", nowhere}, want: exitFailed}, // a port alone is valid: it gets as far as connecting
		{args: []string{"console", "--listen", "0.0.0.0:8080", "--dsn", nowhere}, want: exitUsage},
		{args: []string{"doctor", "--require", "bogus", "--dsn", nowhere}, want: exitUsage},
		{args: []string{"doctor", "--dsn", nowhere}, want: exitFailed},
		{args: []string{"cleanup", "--dsn", nowhere}, want: exitUsage}, // --older-than is required
		{args: []string{"cleanup", "--older-than", "-1h", "--dsn", nowhere}, want: exitUsage},
		{args: []string{"cleanup", "--older-than", "0s", "--dsn", nowhere}, want: exitUsage},
		{args: []string{"partitions", "roll", "--dsn", nowhere}, want: exitUsage}, // --older-than is required
		{args: []string{"partitions", "roll", "--older-than", "-1h", "--dsn", nowhere}, want: exitUsage},
		{args: []string{"partitions", "roll", "--older-than", "1h", "--ahead", "0", "--dsn", nowhere}, want: exitUsage},
		{args: []string{"partitions", "enable", "--size", "10", "--dsn", nowhere}, want: exitUsage},
		{args: []string{"partitions", "enable", "--dsn", nowhere}, want: exitFailed},
		{args: []string{"partitions", "status", "--dsn", nowhere}, want: exitFailed},
		{args: []string{"partitions", "keys", "enable", "--dsn", nowhere}, want: exitUsage}, // --period is required
		{args: []string{"partitions", "keys", "enable", "--period", "-1h", "--dsn", nowhere}, want: exitUsage},
		{args: []string{"partitions", "keys", "enable", "--period", "1h", "--ahead", "0", "--dsn", nowhere}, want: exitUsage},
		{args: []string{"partitions", "keys", "enable", "--period", "1h", "--dsn", nowhere}, want: exitFailed},
		{args: []string{"partitions", "keys", "roll", "--ahead", "101", "--dsn", nowhere}, want: exitUsage},
		{args: []string{"partitions", "keys", "status", "--dsn", nowhere}, want: exitFailed},
		// a DSN parameter that does not parse is a bad argument
		{args: []string{"migrate", "status", "--dsn", "postgres://u@127.0.0.1:1/db?sslmode=disabel"}, want: exitUsage},
		{args: []string{"migrate", "status", "--dsn", "host=127.0.0.1 port=1 user=u connect_timeout=abc"}, want: exitUsage},
		{args: []string{"migrate", "status", "--dsn", "u:p@tcp(127.0.0.1:1)/db?timeout=abc"}, want: exitUsage},
		{args: []string{"migrate", "status", "--dsn", "postgres://u:p@ss#w0rd@127.0.0.1:1/db"}, want: exitUsage},
		{args: []string{"cleanup", "--older-than", "1h", "--tables", "outbox,ledger", "--dsn", nowhere}, want: exitUsage},
		{args: []string{"cleanup", "--older-than", "1h", "--tables", "keys,keys", "--dsn", nowhere}, want: exitUsage},
		{args: []string{"cleanup", "--older-than", "1h", "--tables", "", "--dsn", nowhere}, want: exitUsage},
		{args: []string{"cleanup", "--older-than", "1h", "--tables", "outbox, keys", "--dsn", nowhere}, want: exitFailed}, // spaces as relay --topics reads them
		{args: []string{"cleanup", "--older-than", "1h", "--duty", "1.5", "--dsn", nowhere}, want: exitUsage},
		{args: []string{"cleanup", "--older-than", "1h", "--batch", "0", "--dsn", nowhere}, want: exitUsage},
		{args: []string{"cleanup", "--older-than", "1h", "--rate", "-5", "--dsn", nowhere}, want: exitUsage},
		{args: []string{"cleanup", "--older-than", "1h", "--rate", "NaN", "--dsn", nowhere}, want: exitUsage},
		{args: []string{"cleanup", "--older-than", "1h", "--dsn", nowhere}, want: exitFailed},
		{args: []string{"epoch", "sideways", "--dsn", nowhere}, want: exitUsage},
		{args: []string{"locks", "protocol", "sideways", "--dsn", nowhere}, want: exitUsage},
		{args: []string{"sessions", "revoke", "--dsn", nowhere}, want: exitUsage},
		{args: []string{"demo", "no-such-scenario", "--dsn", nowhere}, want: exitUsage},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			got, out := exitOf(t, bin, c.env, c.args...)
			if got != c.want {
				t.Fatalf("exit %d, want %d\n%s", got, c.want, out)
			}
			if strings.Contains(out, "not registered") || strings.Contains(out, "sqlcoord: sqlcoord") {
				t.Errorf("misleading or repeated text:\n%s", out)
			}
			if c.want == exitUsage && time.Since(start) > 10*time.Second {
				t.Errorf("a usage error took %v: did it connect first?", time.Since(start))
			}
		})
	}
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		dsn := []string{"--dsn", env.DSN}
		check := func(want int, args ...string) {
			t.Helper()
			if got, out := exitOf(t, bin, nil, append(args, dsn...)...); got != want {
				t.Errorf("%v: exit %d, want %d\n%s", args, got, want, out)
			}
		}
		// a database without the schema is not ready: 4
		check(exitUnhealthy, "doctor")
		check(exitUnhealthy, "relay")
		check(exitUnhealthy, "console")
		check(exitUnhealthy, "migrate", "force", "9") // the trap: refused on an empty database
		check(exitOK, "migrate", "status")
		check(exitOK, "migrate", "up")
		check(exitOK, "doctor")
		check(exitOK, "outbox", "stats")
		check(exitNotFound, "outbox", "requeue", "999999")
		if _, out := exitOf(t, bin, nil, append([]string{"outbox", "requeue", "999999"}, dsn...)...); strings.Contains(out, "requeued 0") {
			t.Errorf("outbox requeue of no message claims a result:\n%s", out)
		}
		check(exitNotFound, "jobs", "list", "--job", "nosuch")
		check(exitNotFound, "semaphore", "show", "nosuch")
		check(exitNotFound, "semaphore", "set", "nosuch", "3")
		check(exitNotFound, "semaphore", "release", "nosuch", "0")
		check(exitOK, "semaphore", "set", "nosuch", "3", "--create")
		check(exitOK, "semaphore", "show", "nosuch")
		check(exitNotFound, "leader", "show", "nosuch")
		// SIGINT stops the relay cleanly, and it did not finish: 130
		relay := exec.Command(bin, append([]string{"relay"}, dsn...)...)
		relay.Env = append(os.Environ(), "SQLCOORD_DSN=", "SQLCOORD_POOLER=")
		if err := relay.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second)
		relay.Process.Signal(os.Interrupt)
		err := relay.Wait()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitInterrupted {
			t.Errorf("relay after SIGINT: %v, want exit %d", err, exitInterrupted)
		}
		check(exitNotFound, "jobs", "rerun", "--job", "nope", "--fire", "2026-01-01T00:00:00Z")
		check(exitOK, "outbox", "requeue", "all")
		// a requirement this server cannot meet is refused, not ignored
		if env.Family != "postgres" {
			check(exitUnhealthy, "doctor", "--require", "listen")
		}
		check(exitOK, "doctor", "--require", "galera-locks,slots")
		// a schema a newer release migrated (a rollback): this binary
		// works on it, migrate up is a no-op with a notice, doctor and
		// the migrations it cannot run exit 6
		dbtest.Exec(t, env.DB, `UPDATE coord_schema_migrations SET version = 99`)
		check(exitOK, "migrate", "up")
		if _, out := exitOf(t, bin, nil, append([]string{"migrate", "up"}, dsn...)...); !strings.Contains(out, "schema 99 is newer than this release's") {
			t.Errorf("migrate up on a newer schema says nothing of it:\n%s", out)
		}
		check(exitOK, "migrate", "status")
		check(exitAhead, "doctor")
		check(exitAhead, "migrate", "to", "3")
		check(exitAhead, "migrate", "down", "--yes")
		check(exitOK, "outbox", "stats")
		vs, _ := sqlcoord.Versions(env.DB.Dialect().Family())
		dbtest.Exec(t, env.DB, fmt.Sprintf(`UPDATE coord_schema_migrations SET version = %d`, vs[len(vs)-1]))
	}, dbtest.NoMigrate())
}
