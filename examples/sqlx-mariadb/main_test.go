package main

import (
	"context"
	"os"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func TestExample(t *testing.T) {
	t.Parallel()
	env := dbtest.New(t, "mysql", dbtest.NoMigrate())
	cfg, err := mysql.ParseDSN(env.DSN)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ClientFoundRows = false // an application's DSN: parseTime only
	if err := run(context.Background(), cfg.FormatDSN(), os.Stdout); err != nil {
		t.Fatal(err)
	}
}
