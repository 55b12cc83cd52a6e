package sqlcoord_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImportsPerDialect: an application compiles only its own dialect's
// driver. examples/imports/pgxapp imports every package a pgx
// application uses, examples/imports/mariadbapp every package a MariaDB
// application on database/sql and sqlx uses; `go list -deps` must not
// find the other dialect's driver (nor sqlx, nor golang-migrate's
// database drivers) among what each compiles.
func TestImportsPerDialect(t *testing.T) {
	goBin := "go" // the toolchain running the tests (PATH)
	for _, tc := range []struct {
		app       string
		forbidden []string
	}{
		{"pgxapp", []string{"github.com/go-sql-driver/mysql", "github.com/jmoiron/sqlx", "github.com/golang-migrate/migrate/v4/database/"}},
		{"mariadbapp", []string{"github.com/jackc/pgx", "github.com/jackc/pglogrepl", "github.com/jackc/puddle", "github.com/golang-migrate/migrate/v4/database/"}},
	} {
		t.Run(tc.app, func(t *testing.T) {
			out, err := exec.Command(goBin, "list", "-deps", "./examples/imports/"+tc.app).CombinedOutput()
			if err != nil {
				t.Fatalf("go list -deps: %v\n%s", err, out)
			}
			deps := strings.Fields(string(out))
			if len(deps) < 50 {
				t.Fatalf("go list -deps listed only %d packages: %s", len(deps), out)
			}
			for _, dep := range deps {
				for _, f := range tc.forbidden {
					if strings.HasPrefix(dep, f) {
						t.Errorf("%s compiles %s", tc.app, dep)
					}
				}
			}
		})
	}
}
