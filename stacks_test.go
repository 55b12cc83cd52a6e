package sqlcoord_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

// A MySQL pool that does not parse times (or reads them in another zone)
// is refused at construction with an error that names the setting.
func TestWrapChecksDriverSettings(t *testing.T) {
	t.Parallel()
	env := dbtest.New(t, "mysql")
	ctx := context.Background()
	for setting, mutate := range map[string]func(*mysql.Config){
		"parseTime=true": func(c *mysql.Config) { c.ParseTime = false },
		"loc=UTC":        func(c *mysql.Config) { c.Loc, _ = time.LoadLocation("Europe/Berlin") },
	} {
		cfg, err := mysql.ParseDSN(env.DSN)
		if err != nil {
			t.Fatal(err)
		}
		mutate(cfg)
		raw, err := sql.Open("mysql", cfg.FormatDSN())
		if err != nil {
			t.Fatal(err)
		}
		_, err = sqlcoord.WrapDB(ctx, raw)
		raw.Close()
		if !errors.Is(err, sqlcoord.ErrDriverSetting) || !strings.Contains(err.Error(), strings.Split(setting, "=")[0]) {
			t.Errorf("without %s: %v", setting, err)
		}
	}
}
