package sqlcoord

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// ErrListenUnsupported: the database has no LISTEN/NOTIFY (MySQL,
// MariaDB), or the driver cannot reach a connection that supports it.
var ErrListenUnsupported = errors.New("sqlcoord: LISTEN is not available")

// Listener is implemented by drivers that can wait for PostgreSQL
// notifications. Listen blocks on a dedicated connection, calling wake for
// every notification on channel, until ctx ends (nil) or the connection
// fails (the error); callers reconnect by calling it again.
type Listener interface {
	Listen(ctx context.Context, channel string, wake func()) error
}

var (
	_ Listener = (*DB)(nil)
	_ Listener = (*SQLX)(nil)
	_ Listener = (*Pgx)(nil)
)

func listenOn(ctx context.Context, conn *pgx.Conn, channel string, wake func()) error {
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		return err
	}
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		wake()
	}
}

// Listen on the DSN sqlcoord opened (a connection of its own, outside the
// pool), or for a wrapped pool on one of its connections, held while
// listening.
func (db *DB) Listen(ctx context.Context, channel string, wake func()) error {
	if db.dialect.Family() != "postgres" {
		return fmt.Errorf("%w on %s", ErrListenUnsupported, db.dialect.Name())
	}
	if db.dsn != "" {
		conn, err := pgx.Connect(ctx, db.dsn)
		if err != nil {
			return err
		}
		defer conn.Close(context.WithoutCancel(ctx))
		return listenOn(ctx, conn, channel, wake)
	}
	return listenSQL(ctx, db.DB.DB.Conn, channel, wake)
}

// Listen on one of the pool's connections, held while listening.
func (s *SQLX) Listen(ctx context.Context, channel string, wake func()) error {
	if s.dialect.Family() != "postgres" {
		return fmt.Errorf("%w on %s", ErrListenUnsupported, s.dialect.Name())
	}
	return listenSQL(ctx, s.X.DB.Conn, channel, wake)
}

func listenSQL(ctx context.Context, connect func(context.Context) (*sql.Conn, error), channel string, wake func()) error {
	c, err := connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	return c.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("%w: the database/sql driver is %T, not pgx's stdlib", ErrListenUnsupported, dc)
		}
		return listenOn(ctx, sc.Conn(), channel, wake)
	})
}

// Listen on a connection of its own made with the pool's configuration
// (it does not take one of the pool's connections).
func (p *Pgx) Listen(ctx context.Context, channel string, wake func()) error {
	conn, err := pgx.ConnectConfig(ctx, p.Pool.Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return listenOn(ctx, conn, channel, wake)
}
