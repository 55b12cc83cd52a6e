// Package pgxconf reads the pgx connection configuration back from a
// database/sql pool built on pgx's stdlib driver, for the packages that
// need a connection of their own with the same settings (migrations,
// LISTEN).
package pgxconf

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// FromDB returns a copy of the configuration db's connections were made
// with. When db's driver is not pgx's stdlib the error wraps notPgx.
func FromDB(ctx context.Context, db *sql.DB, notPgx error) (*pgx.ConnConfig, error) {
	c, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	var cfg *pgx.ConnConfig
	err = c.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("%w: the database/sql driver is %T, not pgx's stdlib", notPgx, dc)
		}
		cfg = sc.Conn().Config().Copy()
		return nil
	})
	return cfg, err
}
