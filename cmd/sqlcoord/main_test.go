package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sqlcoord/sqlcoord/internal/dbtest"
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
		if err != nil || !strings.Contains(out, "up to date") {
			t.Fatalf("up: %v\n%s", err, out)
		}
		out, err = runCLI(t, "migrate", "version")
		if err != nil || strings.TrimSpace(out) == "0" {
			t.Fatalf("version: %v %q", err, out)
		}
		out, err = runCLI(t, "migrate", "to", "1")
		if err != nil || !strings.Contains(out, "schema version: 1 of") {
			t.Fatalf("to 1: %v\n%s", err, out)
		}
		out, err = runCLI(t, "migrate", "down")
		if err != nil || !strings.Contains(out, "schema version: 0 of") {
			t.Fatalf("down: %v\n%s", err, out)
		}
	}, dbtest.NoMigrate())
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
