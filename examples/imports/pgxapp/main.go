// Command pgxapp is the smallest program that imports every package a
// pgx application uses (pgxpool, the streaming relay, migrations):
// TestImportsPerDialect checks with `go list -deps` that it compiles no
// MySQL driver, no sqlx and no golang-migrate MySQL driver.
package main

import (
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/console"
	"github.com/sqlcoord/sqlcoord/coord"
	"github.com/sqlcoord/sqlcoord/coord/ids"
	"github.com/sqlcoord/sqlcoord/coord/jobs"
	"github.com/sqlcoord/sqlcoord/membership"
	"github.com/sqlcoord/sqlcoord/metrics/prom"
	"github.com/sqlcoord/sqlcoord/migrate"
	"github.com/sqlcoord/sqlcoord/outbox"
	"github.com/sqlcoord/sqlcoord/outbox/pgstream"
	"github.com/sqlcoord/sqlcoord/pgxv5"
	"github.com/sqlcoord/sqlcoord/saga"
	"github.com/sqlcoord/sqlcoord/session"
	"github.com/sqlcoord/sqlcoord/txn"
)

func main() {
	use((*pgxpool.Pool)(nil), sqlcoord.ErrLocked, console.New, coord.NewOwnerID, ids.NewUUIDv7,
		jobs.Permanent, membership.Watch, prom.Recorder{}, migrate.Up, outbox.New[any], pgstream.New, pgxv5.Wrap,
		saga.Call{}, session.NewToken, txn.Do[any])
}

// use keeps each import referenced.
func use(...any) { fmt.Print() }
