package core

import (
	"context"
	"strings"
	"time"

	"github.com/sqlcoord/sqlcoord/dialects"
	"github.com/sqlcoord/sqlcoord/internal/errs"
)

// Checked is what Check learned of a server.
type Checked struct {
	Dialect *dialects.Dialect
	// Writer is the GaleraSingleWriter node's writer lease (nil unless
	// asked for on a Galera node); its owner closes it.
	Writer *GaleraWriter
}

// Check is the one connection check every sqlcoord.Open and every Wrap
// runs on the pool e reaches (what names it in messages, without
// credentials): the dialect (o.Dialect, or the server's version), Galera
// (a multi-writer cluster needs causal reads; GaleraSingleWriter takes the
// node's writer lease), a writable server unless o.AllowReadOnly,
// synchronous replication when o.RequireSyncReplication, and for the
// MySQL family that the driver returns DATETIME as time.Time in UTC.
// Errors match one sqlcoord sentinel and keep the driver's error.
func Check(ctx context.Context, e dialects.Executor, o Options, what string) (Checked, error) {
	var c Checked
	unreachable := func(err error) error {
		return errs.Errorf("%w to %s: %w", dialects.ErrUnreachable, what, err)
	}
	var version string
	if err := e.QueryRow(ctx, `SELECT VERSION()`).Scan(&version); err != nil {
		return c, unreachable(err)
	}
	d, err := pick(version, o.Dialect)
	if err != nil {
		return c, err
	}
	if d.Family() == "mysql" && o.Dialect != "postgres" {
		galera, err := dialects.IsGalera(ctx, e)
		if err != nil {
			return c, unreachable(d.Classify(err))
		}
		if galera {
			if d, err = checkGalera(ctx, e, o, &c); err != nil {
				return c, err
			}
		}
	}
	c.Dialect = d
	fail := func(err error) (Checked, error) {
		if c.Writer != nil {
			c.Writer.Close()
		}
		return Checked{}, err
	}
	if !o.AllowReadOnly {
		var ro bool
		if err := e.QueryRow(ctx, d.Q().ReadOnly).Scan(&ro); err != nil {
			return fail(unreachable(d.Classify(err)))
		}
		if ro {
			return fail(errs.Errorf("%w: %s is a hot standby or a read-only replica; connect to the primary (or set AllowReadOnly to inspect it)", dialects.ErrReadOnly, what))
		}
	}
	if o.RequireSyncReplication {
		info, err := d.Inspect(ctx, e)
		if err != nil {
			return fail(err)
		}
		if !info.Synchronous {
			return fail(errs.Errorf("%w: %s: %s", dialects.ErrNotSynchronous, what, info.Detail))
		}
	}
	if d.Family() == "mysql" {
		var now time.Time
		if err := e.QueryRow(ctx, `SELECT UTC_TIMESTAMP(6)`).Scan(&now); err != nil {
			return fail(errs.Errorf("%w: the MySQL driver must return DATETIME as time.Time: add parseTime=true to the DSN (%v)", dialects.ErrDriverSetting, err))
		}
		if now.Location() != time.UTC {
			return fail(errs.Errorf("%w: the MySQL driver reads DATETIME in %v: use loc=UTC (the default) in the DSN", dialects.ErrDriverSetting, now.Location()))
		}
	}
	return c, nil
}

// pick is the dialect named by want ("" detects it from version).
func pick(version, want string) (*dialects.Dialect, error) {
	if want != "" {
		d, err := dialects.ByFamily(want)
		if err != nil {
			return nil, err
		}
		if server, _ := pick(version, ""); server.Family() != d.Family() {
			return nil, errs.Errorf("%w: dialect %q is for %s, the server is %s", dialects.ErrDriverSetting, want, d.Family(), server.Family())
		}
		return d, nil
	}
	switch v := strings.ToLower(version); {
	case strings.Contains(v, "postgres"):
		return dialects.Postgres, nil
	case strings.Contains(v, "mariadb"):
		return dialects.MariaDB, nil
	}
	return dialects.MySQL, nil
}

// checkGalera: a multi-writer cluster needs causal reads; with
// GaleraSingleWriter the node takes the writer lease (c.Writer).
func checkGalera(ctx context.Context, e dialects.Executor, o Options, c *Checked) (*dialects.Dialect, error) {
	if o.GaleraSingleWriter {
		w, err := StartGaleraWriter(ctx, e)
		if err != nil {
			return nil, err
		}
		c.Writer = w
		return galeraWriterDialect(w.Check), nil
	}
	var w int
	if err := e.QueryRow(ctx, `SELECT @@session.wsrep_sync_wait`).Scan(&w); err != nil {
		return nil, errs.Errorf("%w: %w", dialects.ErrUnreachable, err)
	}
	if w&3 != 3 {
		return nil, errs.Errorf("%w: on a multi-writer Galera cluster the pool needs causal reads: add wsrep_sync_wait=%s to the DSN (or GaleraSingleWriter if every client writes through one node)", dialects.ErrDriverSetting, dialects.GaleraSyncWait)
	}
	return dialects.Galera, nil
}
