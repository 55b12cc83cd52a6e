package coord_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/coord"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

func TestFence(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		c := coord.New(env.DB)
		try := func(tok int64) error {
			tx, _ := env.DB.BeginTx(ctx, nil)
			defer tx.Rollback()
			if err := c.Fence(ctx, tx, "file", tok); err != nil {
				return err
			}
			return tx.Commit()
		}
		for _, step := range []struct {
			tok   int64
			stale bool
		}{{7, false}, {8, false}, {8, false}, {7, true}, {1, true}, {9, false}} {
			err := try(step.tok)
			if step.stale != errors.Is(err, coord.ErrStaleToken) || (!step.stale && err != nil) {
				t.Fatalf("token %d: %v (stale expected %v)", step.tok, err, step.stale)
			}
		}
		// A fence in a rolled-back transaction does not advance.
		tx, _ := env.DB.BeginTx(ctx, nil)
		if err := c.Fence(ctx, tx, "file", 100); err != nil {
			t.Fatal(err)
		}
		tx.Rollback()
		if err := try(10); err != nil {
			t.Fatalf("after rollback: %v", err)
		}
		tx, _ = env.DB.BeginTx(ctx, nil)
		if err := c.Fence(ctx, tx, "file", 0); !errors.Is(err, coord.ErrInvalidToken) {
			t.Fatalf("token 0: %v", err)
		}
		tx.Rollback()
	})
}

// The source article's story: A holds token 7, pauses past the lease, B
// takes token 8 and writes; A's late write is refused; B's value survives.
func TestFencingStory(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		c := coord.New(env.DB)
		dbtest.Exec(t, env.DB, `CREATE TABLE files (name VARCHAR(50) PRIMARY KEY, body VARCHAR(50) NOT NULL, fence BIGINT NOT NULL DEFAULT 0)`)
		dbtest.Exec(t, env.DB, `INSERT INTO files (name, body) VALUES ('report', 'initial')`)
		// burn tokens 1..6 so A gets 7, as in the article
		for i := 0; i < 6; i++ {
			l, err := c.Acquire(ctx, "report-lock", "", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			c.Release(ctx, l)
		}
		a, err := c.Acquire(ctx, "report-lock", "A", 300*time.Millisecond)
		if err != nil || a.Token != 7 {
			t.Fatalf("A: %+v %v", a, err)
		}
		time.Sleep(500 * time.Millisecond) // A's "GC pause" outlives the lease
		b, err := c.Acquire(ctx, "report-lock", "B", time.Minute)
		if err != nil || b.Token != 8 {
			t.Fatalf("B: %+v %v", b, err)
		}
		write := func(tok int64, body string) error {
			tx, _ := env.DB.BeginTx(ctx, nil)
			defer tx.Rollback()
			err := c.Update(ctx, tx, coord.FencedUpdate{Table: "files", KeyColumn: "name", Key: "report",
				FenceColumn: "fence", Token: tok, Set: map[string]any{"body": body}})
			if err != nil {
				return err
			}
			return tx.Commit()
		}
		if err := write(b.Token, "from B"); err != nil {
			t.Fatal(err)
		}
		err = write(a.Token, "from A (late)")
		var se *coord.StaleTokenError
		if !errors.Is(err, coord.ErrStaleToken) || !errors.As(err, &se) || se.Token != 7 {
			t.Fatalf("A's late write: %v", err)
		}
		// B writing again with the same token is fine
		if err := write(b.Token, "from B again"); err != nil {
			t.Fatal(err)
		}
		var body string
		var fence int64
		env.DB.QueryRowContext(ctx, `SELECT body, fence FROM files WHERE name = 'report'`).Scan(&body, &fence)
		if body != "from B again" || fence != 8 {
			t.Fatalf("final %q fence %d", body, fence)
		}

		// identifiers from callers are validated, never spliced raw
		for _, bad := range []coord.FencedUpdate{
			{Table: "files; DROP TABLE files", KeyColumn: "name", FenceColumn: "fence"},
			{Table: "files", KeyColumn: "name\"", FenceColumn: "fence"},
			{Table: "a.b.c", KeyColumn: "name", FenceColumn: "fence"},
			{Table: "files", KeyColumn: "name", FenceColumn: "fence", Set: map[string]any{"body`": 1}},
			{Table: "files", KeyColumn: "name", FenceColumn: "fence", Set: map[string]any{"fence": 1}},
		} {
			bad.Token, bad.Key = 9, "report"
			tx, _ := env.DB.BeginTx(ctx, nil)
			if err := c.Update(ctx, tx, bad); !errors.Is(err, sqlcoord.ErrInvalidIdent) {
				t.Fatalf("%+v: %v", bad, err)
			}
			tx.Rollback()
		}
		var n int
		env.DB.QueryRowContext(ctx, `SELECT count(*) FROM files`).Scan(&n)
		if n != 1 {
			t.Fatal("files table damaged")
		}
	})
}
