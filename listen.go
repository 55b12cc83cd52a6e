package sqlcoord

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/sqlcoord/sqlcoord/dialects"
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
var ErrNotificationLost = fmt.Errorf("%w: a probe notification was lost", ErrListenUnsupported)

// ListenOptions tune Listener.Listen.
type ListenOptions struct {
	// Probe: right after LISTEN, send a NOTIFY on the channel from another
	// connection and give up with ErrListenUnsupported if it has not
	// arrived within ProbeTimeout. This is how "auto" mode detects a
	// transaction-mode pooler by what matters (delivery), not by guessing.
	Probe bool
	// ProbeTimeout; default 3s.
	ProbeTimeout time.Duration
	// ProbeOnly returns nil right after a successful probe instead of
	// listening on (sqlcoord doctor).
	ProbeOnly bool
}

// Listener is implemented by drivers that can wait for PostgreSQL
// notifications. Listen blocks on a dedicated connection (never one of the
// application pool's), calling wake for every notification on channel,
// until ctx ends (nil) or the connection fails (the error); callers
// reconnect by calling it again.
type Listener interface {
	Listen(ctx context.Context, channel string, opt ListenOptions, wake func()) error
	// CanListen returns an error matching ErrListenUnsupported when
	// Listen cannot work at all (the dialect has no LISTEN).
	CanListen() error
}

var (
	_ Listener = (*DB)(nil)
	_ Listener = (*SQLX)(nil)
	_ Listener = (*Pgx)(nil)
	_ Listener = (*DSNListener)(nil)
)

const probePrefix = "sqlcoord-probe:"

// listenOn listens on conn; with opt.Probe it first proves delivery with a
// NOTIFY that notify sends from another connection.
func listenOn(ctx context.Context, conn *pgx.Conn, channel string, opt ListenOptions, notify func(ctx context.Context, channel, payload string) error, wake func()) error {
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		return err
	}
	if opt.Probe || opt.ProbeOnly {
		if err := probe(ctx, conn, channel, opt, notify, wake); err != nil || opt.ProbeOnly {
			return err
		}
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

func probe(ctx context.Context, conn *pgx.Conn, channel string, opt ListenOptions, notify func(ctx context.Context, channel, payload string) error, wake func()) error {
	limit := opt.ProbeTimeout
	if limit <= 0 {
		limit = 3 * time.Second
	}
	b := make([]byte, 8)
	rand.Read(b)
	payload := probePrefix + hex.EncodeToString(b)
	if err := notify(ctx, channel, payload); err != nil {
		return fmt.Errorf("listen probe: notify: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for {
		n, err := conn.WaitForNotification(pctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if pctx.Err() != nil {
				return fmt.Errorf("%w: a NOTIFY sent from another connection did not arrive within %v (a transaction-mode pooler such as PgBouncer between sqlcoord and PostgreSQL? Listen on a direct connection, or poll)", ErrNotificationLost, limit)
			}
			return err
		}
		if n.Payload == payload {
			return nil
		}
		wake()
	}
}

// notifyVia sends a NOTIFY through e (a pool: another connection than
// the listening one).
func notifyVia(e Executor) func(ctx context.Context, channel, payload string) error {
	return func(ctx context.Context, channel, payload string) error {
		_, err := e.Exec(ctx, `SELECT pg_notify($1, $2)`, channel, payload)
		return err
	}
}

// CanListen: PostgreSQL only.
func (db *DB) CanListen() error { return canListen(db.dialect) }

// CanListen: PostgreSQL only.
func (s *SQLX) CanListen() error { return canListen(s.dialect) }

// CanListen: always (a pgx pool is PostgreSQL).
func (p *Pgx) CanListen() error { return nil }

// CanListen: always (NewDSNListener takes PostgreSQL DSNs only).
func (l *DSNListener) CanListen() error { return nil }

func canListen(d *dialects.Dialect) error {
	if d.Family() != "postgres" {
		return fmt.Errorf("%w on %s", ErrListenUnsupported, d.Name())
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
	var cfg *pgx.ConnConfig
	var err error
	if db.dsn != "" {
		if cfg, err = pgx.ParseConfig(db.dsn); err != nil {
			return err
		}
	} else if cfg, err = poolConnConfig(ctx, db.DB.DB); err != nil {
		return err
	}
	return listenWith(ctx, cfg, channel, opt, notifyVia(db.Executor()), wake)
}

// Listen on a connection of its own, made with the configuration of one of
// the pool's connections (returned to the pool at once).
func (s *SQLX) Listen(ctx context.Context, channel string, opt ListenOptions, wake func()) error {
	if err := s.CanListen(); err != nil {
		return err
	}
	cfg, err := poolConnConfig(ctx, s.X.DB)
	if err != nil {
		return err
	}
	return listenWith(ctx, cfg, channel, opt, notifyVia(s.Executor()), wake)
}

// Listen on a connection of its own made with the pool's configuration
// (it does not take one of the pool's connections).
func (p *Pgx) Listen(ctx context.Context, channel string, opt ListenOptions, wake func()) error {
	return listenWith(ctx, p.Pool.Config().ConnConfig.Copy(), channel, opt, notifyVia(p.Executor()), wake)
}

func listenWith(ctx context.Context, cfg *pgx.ConnConfig, channel string, opt ListenOptions, notify func(ctx context.Context, channel, payload string) error, wake func()) error {
	cfg.DefaultQueryExecMode = pgx.QueryExecModeExec // one statement: nothing to cache, nothing to collide
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return listenOn(ctx, conn, channel, opt, notify, wake)
}

// poolConnConfig is the pgx configuration a database/sql pool on pgx's
// stdlib driver connects with.
func poolConnConfig(ctx context.Context, db *sql.DB) (*pgx.ConnConfig, error) {
	c, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	var cfg *pgx.ConnConfig
	err = c.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("%w: the database/sql driver is %T, not pgx's stdlib", ErrListenUnsupported, dc)
		}
		cfg = sc.Conn().Config().Copy()
		return nil
	})
	return cfg, err
}

// DSNListener listens on a PostgreSQL DSN of its own — typically a direct
// connection to the server when the application's pool goes through a
// transaction-mode pooler (PgBouncer), where LISTEN cannot work. Its
// String() hides the password.
type DSNListener struct {
	dsn, shown string
}

// NewDSNListener validates dsn (PostgreSQL only).
func NewDSNListener(dsn string) (*DSNListener, error) {
	family, driverDSN, shown, err := ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	if family != "postgres" {
		return nil, fmt.Errorf("%w: %s is not PostgreSQL", ErrListenUnsupported, shown)
	}
	return &DSNListener{dsn: driverDSN, shown: shown}, nil
}

func (l *DSNListener) String() string { return l.shown }

// Listen on a new connection to the listener's DSN; the probe's NOTIFY
// comes from a second connection to it.
func (l *DSNListener) Listen(ctx context.Context, channel string, opt ListenOptions, wake func()) error {
	cfg, err := pgx.ParseConfig(l.dsn)
	if err != nil {
		return fmt.Errorf("%w %s: %s", ErrBadDSN, l.shown, redactErr(err, l.dsn))
	}
	notify := func(ctx context.Context, channel, payload string) error {
		nc := cfg.Copy()
		nc.DefaultQueryExecMode = pgx.QueryExecModeExec
		c, err := pgx.ConnectConfig(ctx, nc)
		if err != nil {
			return err
		}
		defer c.Close(context.WithoutCancel(ctx))
		_, err = c.Exec(ctx, `SELECT pg_notify($1, $2)`, channel, payload)
		return err
	}
	if err := listenWith(ctx, cfg.Copy(), channel, opt, notify, wake); err != nil {
		return redactedError{"sqlcoord: listen on " + l.shown + ": " + redactErr(err, l.dsn), err}
	}
	return nil
}

// redactedError shows a message with the DSN's secrets removed and still
// matches what it wraps with errors.Is and errors.As.
type redactedError struct {
	msg string
	err error
}

func (e redactedError) Error() string { return e.msg }
func (e redactedError) Unwrap() error { return e.err }
