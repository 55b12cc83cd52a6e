package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord/coord"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

// Operators list, show and depose leaders, and list, show,
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
			if err != nil || !strings.Contains(out, `"id": "node-a"`) {
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
			if out, err := runCLI(t, "leader", "show", "scheduler", "--dsn", env.DSN); err != nil || !strings.Contains(out, "no leader") {
				t.Fatalf("show without a leader: %v\n%s", err, out)
			}
		})
		t.Run("leader show lists the candidates waiting, in queue order", func(t *testing.T) {
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			lead, err := e.Campaign(ctx, "again")
			if err != nil {
				t.Fatal(err)
			}
			defer lead.Resign(ctx)
			for i, id := range []string{"node-b", "node-c"} {
				f, _ := coord.New(env.DB).Election("scheduler", coord.ElectionOptions{ID: id, TTL: 30 * time.Second})
				go f.Campaign(wctx, id)
				for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
					ws, _ := f.Waiters(ctx)
					if len(ws) == i+1 {
						break
					}
					if time.Now().After(deadline) {
						t.Fatal("the candidate did not queue")
					}
				}
			}
			out, err := runCLI(t, "leader", "show", "scheduler", "--dsn", env.DSN)
			b, c := strings.Index(out, "node-b"), strings.Index(out, "node-c")
			if err != nil || b < 0 || c < b || !strings.Contains(out, "waiting, in queue order (2)") {
				t.Fatalf("%v\n%s", err, out)
			}
		})
		t.Run("an election nobody ever led or waited in is not found", func(t *testing.T) {
			if out, err := runCLI(t, "leader", "show", "schedulr", "--dsn", env.DSN); exitCode(ctx, err) != exitNotFound {
				t.Fatalf("exit %d: %s", exitCode(ctx, err), out)
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
		t.Run("a mistyped semaphore is reported, not created", func(t *testing.T) {
			for _, args := range [][]string{{"show", "exprots"}, {"set", "exprots", "3"}, {"release", "exprots", "0"}} {
				out, err := runCLI(t, append(append([]string{"semaphore"}, args...), "--dsn", env.DSN)...)
				if exitCode(ctx, err) != exitNotFound || !strings.Contains(err.Error(), "no semaphore") {
					t.Fatalf("semaphore %v: exit %d, %v\n%s", args, exitCode(ctx, err), err, out)
				}
			}
			if n := len(mustSemaphores(t, c)); n != 1 {
				t.Fatalf("%d semaphores recorded, want 1", n)
			}
			if out, err := runCLI(t, "semaphore", "set", "exprots", "3", "--create", "--dsn", env.DSN); err != nil {
				t.Fatalf("set --create: %v\n%s", err, out)
			}
		})
		t.Run("semaphore show lists the waiters, in queue order", func(t *testing.T) {
			q, _ := c.Semaphore("queued", 1)
			held, err := q.TryAcquire(ctx, "holder", 30*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer q.Release(ctx, held)
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			for i, id := range []string{"w-1", "w-2"} {
				go q.Acquire(wctx, id, time.Minute)
				for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
					ws, _ := q.Waiters(ctx)
					if len(ws) == i+1 {
						break
					}
					if time.Now().After(deadline) {
						t.Fatal("the waiter did not queue")
					}
				}
			}
			out, err := runCLI(t, "semaphore", "show", "queued", "--dsn", env.DSN, "--json")
			var doc struct {
				Waiters []struct {
					Position int    `json:"position"`
					Owner    string `json:"owner"`
					Live     bool   `json:"live"`
				} `json:"waiters"`
			}
			if err != nil || json.Unmarshal([]byte(out), &doc) != nil || len(doc.Waiters) != 2 ||
				doc.Waiters[0].Owner != "w-1" || doc.Waiters[1].Position != 2 || !doc.Waiters[1].Live {
				t.Fatalf("%v\n%s", err, out)
			}
		})
	})
}

func mustSemaphores(t *testing.T, c *coord.Client[*sql.Tx]) []coord.SemaphoreInfo {
	t.Helper()
	ss, err := c.Semaphores(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	return ss
}
