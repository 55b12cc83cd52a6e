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
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		driver, dsn := "pgx", env.DSN
		if env.Family == "mysql" {
			cfg, err := mysql.ParseDSN(env.DSN)
			if err != nil {
				t.Fatal(err)
			}
			cfg.ClientFoundRows = false // an application's DSN: parseTime only
			driver, dsn = "mysql", cfg.FormatDSN()
		}
		if err := run(context.Background(), driver, dsn, os.Stdout); err != nil {
			t.Fatal(err)
		}
	})
}
