package migrate

import (
	"context"

	"github.com/golang-migrate/migrate/v4/database"

	"github.com/sqlcoord/sqlcoord"
)

// DriverFor is golang-migrate's database.Driver sqlcoord migrates db with
// (for the conformance test).
func DriverFor(ctx context.Context, db sqlcoord.Base) (database.Driver, error) {
	c, done, err := migrationConn(ctx, db)
	if err != nil {
		return nil, err
	}
	return openConn(ctx, c, db.Dialect(), pgxExecMode(db.Dialect().Family()), done)
}
