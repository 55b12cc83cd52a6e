package sqlcoord

import (
	"context"
	"errors"
	"time"

	"github.com/sqlcoord/sqlcoord/internal/core"
	"github.com/sqlcoord/sqlcoord/internal/errs"
)

// ErrListenUnsupported: the database has no LISTEN/NOTIFY (MySQL,
// MariaDB), the driver cannot reach a connection that supports it, or —
// with ListenOptions.Probe — a notification sent from another connection
// did not arrive (a transaction-mode pooler such as PgBouncer in between:
// LISTEN succeeds on whichever server connection the bouncer lent, which
// then goes back to its pool, and notifications never reach the client).
var ErrListenUnsupported = errors.New("sqlcoord: LISTEN is not available")

// ErrNotificationLost (matches ErrListenUnsupported): the probe's NOTIFY,
// sent from another connection, did not arrive on the listening one.
var ErrNotificationLost = errs.Errorf("%w: a probe notification was lost", ErrListenUnsupported)

// ListenOptions tune Listener.Listen.
type ListenOptions struct {
	// Probe: right after LISTEN, send a NOTIFY on the channel from another
	// connection and give up with ErrListenUnsupported if it has not
	// arrived within ProbeTimeout — how "auto" mode detects a
	// transaction-mode pooler by what matters (delivery), not by guessing.
	Probe bool
	// ProbeTimeout; default 3s.
	ProbeTimeout time.Duration
	// ProbeOnly returns nil right after a successful probe instead of
	// listening on (sqlcoord doctor).
	ProbeOnly bool
	// Ready, if set, is called once the LISTEN is in effect (after a
	// successful probe, with Probe): a NOTIFY committed from then on
	// reaches wake.
	Ready func()
	// Payload, if set, is called with each notification's payload, just
	// before wake. A Listener that cannot tell payloads leaves it uncalled.
	Payload func(string)
}

// Listener is implemented by drivers that can wait for PostgreSQL
// notifications. Listen blocks on a dedicated connection (never one of the
// application pool's), calling wake for every notification on channel,
// until ctx ends (nil) or the connection fails (the error); callers
// reconnect by calling it again.
type Listener interface {
	Listen(ctx context.Context, channel string, opt ListenOptions, wake func()) error
	// CanListen returns an error matching ErrListenUnsupported when
	// Listen cannot work at all.
	CanListen() error
}

var _ Listener = (*DB)(nil)

// CanListen: PostgreSQL, through pgx's stdlib driver, with package pgxv5
// imported (it holds the pgx-specific listening code).
func (db *DB) CanListen() error {
	if db.dialect.Family() != "postgres" {
		return errs.Errorf("%w on %s", ErrListenUnsupported, db.dialect.Name())
	}
	if core.PgxStdlibListen == nil {
		return errs.Errorf("%w: import github.com/sqlcoord/sqlcoord/pgxv5 to listen through a database/sql pool", ErrListenUnsupported)
	}
	return nil
}

// Listen on a connection of its own: the DSN sqlcoord opened, or for a
// wrapped database/sql pool a new connection made with the configuration
// of one of its connections (returned to the pool at once).
func (db *DB) Listen(ctx context.Context, channel string, opt ListenOptions, wake func()) error {
	if err := db.CanListen(); err != nil {
		return err
	}
	return core.PgxStdlibListen(ctx, db.DB, db.dsn, channel, core.ListenOptions(opt), core.NotifyVia(db.Executor()), wake)
}
