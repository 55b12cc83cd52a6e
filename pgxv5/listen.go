package pgxv5

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/internal/core"
	"github.com/sqlcoord/sqlcoord/internal/errs"
	"github.com/sqlcoord/sqlcoord/internal/pgxconf"
	"github.com/sqlcoord/sqlcoord/internal/redact"
)

// CanListen: always (a pgx pool is PostgreSQL).
func (d *Driver) CanListen() error { return nil }

// Listen on a connection of its own made with the pool's configuration
// (it does not take one of the pool's connections).
func (d *Driver) Listen(ctx context.Context, channel string, opt sqlcoord.ListenOptions, wake func()) error {
	return listenWith(ctx, d.Pool.Config().ConnConfig.Copy(), channel, opt, core.NotifyVia(d.Executor()), wake)
}

// stdlibListen listens for a database/sql pool on pgx's stdlib driver
// (core.PgxStdlibListen): on dsn when sqlcoord opened it, else with the
// configuration of one of the pool's connections.
func stdlibListen(ctx context.Context, db *sql.DB, dsn, channel string, opt core.ListenOptions, notify func(ctx context.Context, channel, payload string) error, wake func()) error {
	var cfg *pgx.ConnConfig
	var err error
	if dsn != "" {
		if cfg, err = pgx.ParseConfig(dsn); err != nil {
			return err
		}
	} else if cfg, err = pgxconf.FromDB(ctx, db, sqlcoord.ErrListenUnsupported); err != nil {
		return err
	}
	return listenWith(ctx, cfg, channel, sqlcoord.ListenOptions(opt), notify, wake)
}

const probePrefix = "sqlcoord-probe:"

// listenOn listens on conn; with opt.Probe it first proves delivery with a
// NOTIFY that notify sends from another connection.
func listenOn(ctx context.Context, conn *pgx.Conn, channel string, opt sqlcoord.ListenOptions, notify func(ctx context.Context, channel, payload string) error, wake func()) error {
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		return err
	}
	if opt.Probe || opt.ProbeOnly {
		if err := probe(ctx, conn, channel, opt, notify, wake); err != nil || opt.ProbeOnly {
			return err
		}
	}
	if opt.Ready != nil {
		opt.Ready()
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if opt.Payload != nil {
			opt.Payload(n.Payload)
		}
		wake()
	}
}

func probe(ctx context.Context, conn *pgx.Conn, channel string, opt sqlcoord.ListenOptions, notify func(ctx context.Context, channel, payload string) error, wake func()) error {
	limit := opt.ProbeTimeout
	if limit <= 0 {
		limit = 3 * time.Second
	}
	b := make([]byte, 8)
	rand.Read(b)
	payload := probePrefix + hex.EncodeToString(b)
	if err := notify(ctx, channel, payload); err != nil {
		return errs.Errorf("listen probe: notify: %w", err)
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
				return errs.Errorf("%w: a NOTIFY sent from another connection did not arrive within %v (a transaction-mode pooler such as PgBouncer between sqlcoord and PostgreSQL? Listen on a direct connection, or poll)", sqlcoord.ErrNotificationLost, limit)
			}
			return err
		}
		if n.Payload == payload {
			return nil
		}
		if opt.Payload != nil {
			opt.Payload(n.Payload)
		}
		wake()
	}
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
	family, driverDSN, shown, err := sqlcoord.ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	if family != "postgres" {
		return nil, errs.Errorf("%w: %s is not PostgreSQL", sqlcoord.ErrListenUnsupported, shown)
	}
	return &DSNListener{dsn: driverDSN, shown: shown}, nil
}

func (l *DSNListener) String() string { return l.shown }

// Listen on a new connection to the listener's DSN; the probe's NOTIFY
// comes from a second connection to it.
func (l *DSNListener) Listen(ctx context.Context, channel string, opt sqlcoord.ListenOptions, wake func()) error {
	cfg, err := pgx.ParseConfig(l.dsn)
	if err != nil {
		return errs.Errorf("%w %s: %s", sqlcoord.ErrBadDSN, l.shown, redactErr(err, l.dsn))
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
		return redact.Error{Msg: "sqlcoord: listen on " + l.shown + ": " + redactErr(err, l.dsn), Err: err}
	}
	return nil
}
func listenWith(ctx context.Context, cfg *pgx.ConnConfig, channel string, opt sqlcoord.ListenOptions, notify func(ctx context.Context, channel, payload string) error, wake func()) error {
	cfg.DefaultQueryExecMode = pgx.QueryExecModeExec // one statement: nothing to cache, nothing to collide
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return listenOn(ctx, conn, channel, opt, notify, wake)
}

// CanListen: always (NewDSNListener takes PostgreSQL DSNs only).
func (l *DSNListener) CanListen() error { return nil }

var _ sqlcoord.Listener = (*DSNListener)(nil)
