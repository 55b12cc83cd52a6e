package sqlcoord_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

// sentinel is the password the secret tests look for in every output.
const sentinel = "S3ntinel-Pw_x9"

func closedPort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return port
}

// No form of DSN leaks its password through String(), Open's
// errors or the migration status.
func TestPasswordNeverShown(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		for form, dsn := range env.PasswordDSNs(t, sentinel) {
			t.Run(form, func(t *testing.T) {
				db, err := sqlcoord.Open(ctx, dsn)
				if err != nil {
					t.Fatalf("open: %v", err)
				}
				defer db.Close()
				if s := db.String(); strings.Contains(s, sentinel) || !strings.Contains(s, "xxxxx") {
					t.Errorf("String() = %q", s)
				}
				if _, err := sqlcoord.MigrationStatus(ctx, db); err != nil {
					t.Fatal(err)
				}
				// unreachable server: the error names it, without the password
				port := strconv.Itoa(env.Server.Port)
				bad := strings.Replace(dsn, port, strconv.Itoa(closedPort(t)), 1)
				_, err = sqlcoord.Open(ctx, bad)
				if !errors.Is(err, sqlcoord.ErrUnreachable) || strings.Contains(err.Error(), sentinel) {
					t.Errorf("Open(unreachable) = %v", err)
				}
				// an option the driver refuses
				sep := "?"
				if strings.Contains(dsn, "?") {
					sep = "&"
				}
				badOpt := dsn + sep + "sslmode=bogus"
				if form == "key=value" {
					badOpt = dsn + " sslmode=bogus"
				} else if env.Family == "mysql" {
					badOpt = dsn + sep + "timeout=notaduration"
				}
				_, err = sqlcoord.Open(ctx, badOpt)
				if err == nil || strings.Contains(err.Error(), sentinel) {
					t.Errorf("Open(bad option) = %v", err)
				}
			})
		}
		_, err := sqlcoord.Open(ctx, fmt.Sprintf("redis://u:%s@h/0", sentinel))
		if !errors.Is(err, sqlcoord.ErrBadDSN) || strings.Contains(err.Error(), sentinel) {
			t.Errorf("unknown scheme: %v", err)
		}
	}, dbtest.NoMigrate())
}
