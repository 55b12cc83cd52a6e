// Command mariadbapp is the smallest program that imports every package a
// MariaDB application on database/sql and sqlx uses: TestImportsPerDialect
// checks with `go list -deps` that it compiles no pgx and no pglogrepl.
package main

import (
	"fmt"

	_ "github.com/go-sql-driver/mysql"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/console"
	"github.com/sqlcoord/sqlcoord/coord"
	"github.com/sqlcoord/sqlcoord/coord/ids"
	"github.com/sqlcoord/sqlcoord/coord/jobs"
	"github.com/sqlcoord/sqlcoord/membership"
	"github.com/sqlcoord/sqlcoord/metrics/prom"
	"github.com/sqlcoord/sqlcoord/migrate"
	"github.com/sqlcoord/sqlcoord/outbox"
	"github.com/sqlcoord/sqlcoord/saga"
	"github.com/sqlcoord/sqlcoord/session"
	"github.com/sqlcoord/sqlcoord/sqlxdriver"
	"github.com/sqlcoord/sqlcoord/txn"
)

func main() {
	use(sqlcoord.Open, console.New, coord.NewOwnerID, ids.NewUUIDv7, jobs.Permanent, membership.Watch,
		prom.Recorder{}, migrate.Up, outbox.New[any], saga.Call{}, session.NewToken, sqlxdriver.Wrap, txn.Do[any])
}

// use keeps each import referenced.
func use(...any) { fmt.Print() }
