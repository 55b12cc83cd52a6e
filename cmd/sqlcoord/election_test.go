package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord/coord"
	"github.com/sqlcoord/sqlcoord/internal/dbtest"
)

// Issue 40: operators list, show and depose leaders, and list, show,
// resize and revoke semaphores.
func TestLeaderAndSemaphoreCLI(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		c := coord.New(env.DB)
		e, err := c.Election("scheduler", coord.ElectionOptions{ID: "node-a", TTL: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		l, err := e.Campaign(ctx, "10.1.2.3:8080")
		if err != nil {
			t.Fatal(err)
		}
		t.Run("leader list", func(t *testing.T) {
			out, err := runCLI(t, "leader", "list", "--dsn", env.DSN)
			if err != nil || !strings.Contains(out, "scheduler") || !strings.Contains(out, "node-a") || !strings.Contains(out, "10.1.2.3:8080") {
				t.Fatalf("%v\n%s", err, out)
			}
		})
		t.Run("leader show", func(t *testing.T) {
			out, err := runCLI(t, "leader", "show", "scheduler", "--dsn", env.DSN, "--json")
			if err != nil || !strings.Contains(out, `"ID": "node-a"`) {
				t.Fatalf("%v\n%s", err, out)
			}
		})
		t.Run("leader resign", func(t *testing.T) {
			out, err := runCLI(t, "leader", "resign", "scheduler", "--dsn", env.DSN)
			if err != nil || !strings.Contains(out, "ended") {
				t.Fatalf("%v\n%s", err, out)
			}
			if _, err := e.Leader(ctx); !errors.Is(err, coord.ErrNoLeader) {
				t.Fatalf("after resign: %v", err)
			}
			if err := l.Proclaim(ctx, "x"); !errors.Is(err, coord.ErrNotLeader) {
				t.Fatalf("deposed leader's Proclaim: %v", err)
			}
			if _, err := runCLI(t, "leader", "show", "scheduler", "--dsn", env.DSN); err == nil {
				t.Fatal("show without a leader succeeded")
			}
		})
		t.Run("bad election name", func(t *testing.T) {
			out, err := runCLI(t, "leader", "show", "bad\xff", "--dsn", env.DSN)
			if exitCode(ctx, err) != 2 {
				t.Fatalf("exit %d: %s", exitCode(ctx, err), out)
			}
		})
		s, _ := c.Semaphore("exports", 3)
		p, err := s.TryAcquire(ctx, "worker-1", 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Run("semaphore list and show", func(t *testing.T) {
			out, err := runCLI(t, "semaphore", "list", "--dsn", env.DSN)
			if err != nil || !strings.Contains(out, "exports") {
				t.Fatalf("%v\n%s", err, out)
			}
			out, err = runCLI(t, "semaphore", "show", "exports", "--dsn", env.DSN)
			if err != nil || !strings.Contains(out, "3 permits, 1 held") || !strings.Contains(out, "worker-1") {
				t.Fatalf("%v\n%s", err, out)
			}
		})
		t.Run("semaphore set and release", func(t *testing.T) {
			if out, err := runCLI(t, "semaphore", "set", "exports", "0", "--dsn", env.DSN); exitCode(ctx, err) != 2 {
				t.Fatalf("set 0: exit %d %s", exitCode(ctx, err), out)
			}
			if out, err := runCLI(t, "semaphore", "set", "exports", "5", "--dsn", env.DSN); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if n, _ := s.Permits(ctx); n != 5 {
				t.Fatalf("permits %d", n)
			}
			if out, err := runCLI(t, "semaphore", "release", "exports", "x", "--dsn", env.DSN); exitCode(ctx, err) != 2 {
				t.Fatalf("release x: exit %d %s", exitCode(ctx, err), out)
			}
			out, err := runCLI(t, "semaphore", "release", "exports", strings.TrimSpace(itoa(p.Slot)), "--dsn", env.DSN)
			if err != nil || !strings.Contains(out, "revoked") {
				t.Fatalf("%v\n%s", err, out)
			}
			if err := s.Release(ctx, p); !errors.Is(err, coord.ErrLeaseLost) {
				t.Fatalf("release of a revoked permit: %v", err)
			}
		})
	})
}
