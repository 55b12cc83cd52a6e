package main

import (
	"context"
	"os"
	"testing"

	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func TestExample(t *testing.T) {
	t.Parallel()
	env := dbtest.New(t, "postgres", dbtest.NoMigrate())
	if err := run(context.Background(), env.DSN, os.Stdout); err != nil {
		t.Fatal(err)
	}
}
