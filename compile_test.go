package sqlcoord_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Helpers that must run inside the caller's transaction take
// only that stack's transaction type: a lock or a fence on a bare pool
// does not compile. Each snippet is built as a tiny program in the module;
// the control snippet (a real transaction) must build, so a failure is the
// type check and not something else.
func TestPoolWhereTransactionNeededDoesNotCompile(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds programs")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	const header = `package main

import (
	"context"
	"database/sql"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/coord"
	"github.com/sqlcoord/sqlcoord/pgxv5"
)

var (
	_ *sql.Tx
	_ pgx.Tx
	_ *pgxpool.Pool
)

func main() {
	ctx := context.Background()
	var db *sqlcoord.DB
	var tx *sql.Tx
	var p *pgxv5.Driver
	var ptx pgx.Tx
	_, _, _, _ = db, tx, p, ptx
	c, pc := coord.New(db), coord.New(p)
	_, _ = c, pc
`
	for _, tc := range []struct {
		name, body, wantErr string
	}{
		{"control: locks and fences in transactions", `_ = c.TryLock(ctx, tx, "x"); _ = c.Fence(ctx, tx, "r", 1); _ = pc.TryLock(ctx, ptx, "x")`, ""},
		{"TryLock on a database/sql pool", `_ = c.TryLock(ctx, db, "x")`, "cannot use db"},
		{"Fence on a database/sql pool", `_ = c.Fence(ctx, db, "r", 1)`, "cannot use db"},
		{"Lock on the *sql.DB inside", `_ = c.Lock(ctx, db.DB, "x", 0)`, "cannot use db.DB"},
		{"TryLock on a pgx pool", `_ = pc.TryLock(ctx, p.Pool, "x")`, "cannot use p.Pool"},
		{"a database/sql transaction for a pgx driver", `_ = pc.Fence(ctx, tx, "r", 1)`, "cannot use tx"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, err := os.MkdirTemp(".", "zz_compilecheck_")
			if err != nil {
				t.Fatal(err)
			}
			defer os.RemoveAll(dir)
			if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(header+"\t"+tc.body+"\n}\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(gobin, "build", "-o", os.DevNull, "./"+filepath.Base(dir)).CombinedOutput()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("control does not build: %v\n%s", err, out)
			case tc.wantErr != "" && err == nil:
				t.Fatalf("compiled; want a type error")
			case tc.wantErr != "" && !strings.Contains(string(out), tc.wantErr):
				t.Fatalf("build failed, but not with %q:\n%s", tc.wantErr, out)
			}
		})
	}
}
