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

// TestLayers: the packages the root package is built on (internal/...,
// dialects, metrics, sql) never import the root or anything built on it,
// directly or through another package: a layer never climbs back up.
func TestLayers(t *testing.T) {
	const root = "github.com/sqlcoord/sqlcoord"
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Deps \" \"}}",
		"./internal/...", "./dialects", "./metrics", "./sql").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 10 {
		t.Fatalf("go list listed only %d packages:\n%s", len(lines), out)
	}
	for _, line := range lines {
		f := strings.Fields(line)
		for _, dep := range f[1:] {
			if dep == root || strings.HasPrefix(dep, root+"/sqlcoordtest") {
				t.Errorf("%s depends on %s, which sits above it", f[0], dep)
			}
		}
	}
}
