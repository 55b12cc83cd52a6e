// Package sqlcoord opens PostgreSQL and MySQL/MariaDB databases for the
// coordination primitives in coord/, txn/ and outbox/, and installs their
// schema (embedded golang-migrate migrations, see Migrate).
//
// Every guarantee sqlcoord gives is enforced by the database: unique
// indexes, row locks and conditional updates evaluated with the server's
// clock. The Go code only wraps that SQL.
package sqlcoord

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"github.com/sqlcoord/sqlcoord/metrics"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
	"github.com/jmoiron/sqlx"
	"go.opentelemetry.io/otel/trace"

	"github.com/sqlcoord/sqlcoord/dialects"
	"github.com/sqlcoord/sqlcoord/internal/redact"
)

// ErrBadDSN is returned (wrapped) for a DSN sqlcoord cannot use.
var ErrBadDSN = errors.New("sqlcoord: bad DSN")

// ErrUnreachable is returned (wrapped) when the server cannot be reached
// or refuses the login.
var ErrUnreachable = errors.New("sqlcoord: cannot connect")

// DB is a connection pool that knows its dialect. It embeds *sqlx.DB, so it
// is also a *sql.DB for everything database/sql offers.
type DB struct {
	*sqlx.DB

	dialect *dialects.Dialect // detected from the server
	epochs  *Epochs           // failover-epoch high-water mark
	writer  *galeraWriter     // GaleraSingleWriter: this node's writer lease
	pre     []any             // statement-mode arguments, see poolerArgs
	tracer  trace.Tracer      // nil: tracing off
	metrics metrics.Recorder  // nil: off
	dsn     string            // driver DSN with every option sqlcoord needs ("" when wrapped)
	shown   string            // DSN with the password replaced, for messages
}

// Options tune Open. The zero value is sensible.
type Options struct {
	MaxOpenConns    int           // default 20
	MaxIdleConns    int           // default 10
	ConnMaxLifetime time.Duration // default 30m
	ConnMaxIdleTime time.Duration // default 5m
	// Pooler: the DSN reaches PostgreSQL through a transaction-mode
	// pooler (PgBouncer): sqlcoord's statements run without named
	// prepared statements. Same as default_query_exec_mode=exec in the
	// DSN; see WrapOptions.Pooler and README "PgBouncer".
	Pooler bool
	// AllowReadOnly opens a server that refuses writes (a hot standby, a
	// read_only replica) instead of failing with dialects.ErrReadOnly —
	// for inspection only (sqlcoord doctor, listings).
	AllowReadOnly bool
	// RequireSyncReplication refuses (dialects.ErrNotSynchronous) a server
	// whose commits are acknowledged before a standby has them: see
	// Inspect and README "What survives which failover". Checked when the
	// pool is opened; the settings can change later (sqlcoord doctor).
	RequireSyncReplication bool
	// EpochFile keeps the pool's failover-epoch high-water mark (see
	// Epochs) in a file, so that a restarted process still refuses a
	// stale primary it would otherwise take for the current one. "" keeps
	// it in memory. Open refuses (dialects.ErrStalePrimary) a server
	// older than the mark in the file.
	EpochFile string
	// GaleraSingleWriter: on a MariaDB Galera cluster, every client of
	// this database writes through one node, so row locks are allowed
	// (dialects.GaleraSingleWriter); otherwise they are refused there
	// with dialects.ErrGaleraLocks. See dialects.Galera.
	GaleraSingleWriter bool
}

// Open parses dsn, connects and pings. Accepted forms:
//
//	postgres://user:pass@host:5432/db?sslmode=disable   (also postgresql://)
//	mysql://user:pass@tcp(host:3306)/db?opt=...          (go-sql-driver form behind mysql://)
//	mysql://user:pass@host:3306/db                        (URL form)
//	user:pass@tcp(host:3306)/db                           (plain go-sql-driver form)
//	host=h port=5432 user=u password=p dbname=db           (libpq key=value, PostgreSQL)
//
// For MySQL/MariaDB it forces parseTime=true and loc=UTC (times are read
// as time.Time in UTC) and clientFoundRows (rows affected counts matched
// rows; sqlcoord's own statements no longer depend on it, see WrapDB).
// Errors, String() and everything sqlcoord logs never contain the password,
// in any of these forms (userinfo, password=… query parameter, key=value).
func Open(ctx context.Context, dsn string, opts ...Options) (*DB, error) {
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	family, driverDSN, shown, err := ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	if family == "postgres" && !o.AllowReadOnly {
		// Every new connection checks it reached a writable server (and
		// with several hosts in the DSN, pgx picks the one that is): a
		// pool that reconnects after a failover never lands on a standby.
		driverDSN = withPGParam(driverDSN, "target_session_attrs", "read-write")
	}
	d := dialects.Postgres
	if family == "mysql" {
		d = dialects.MariaDB // refined below from VERSION()
	}
	sdb, err := openPool(d, driverDSN)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %v", ErrBadDSN, shown, redactErr(err, dsn))
	}
	setPool(sdb, o)
	pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := sdb.PingContext(pctx); err != nil {
		sdb.Close()
		if errors.Is(d.Classify(err), dialects.ErrReadOnly) {
			return nil, readOnlyError(shown, err, dsn)
		}
		return nil, fmt.Errorf("%w to %s: %s", ErrUnreachable, shown, redactErr(err, dsn))
	}
	var writer *galeraWriter
	fail := func(err error) (*DB, error) {
		if writer != nil {
			writer.close()
		}
		sdb.Close()
		return nil, err
	}
	if family == "mysql" {
		var v string
		if err := sdb.QueryRowContext(pctx, d.Q.Version).Scan(&v); err != nil {
			sdb.Close()
			return nil, fmt.Errorf("%w to %s: %s", ErrUnreachable, shown, redactErr(err, dsn))
		}
		if !strings.Contains(strings.ToLower(v), "mariadb") {
			d = dialects.MySQL
		}
		galera, err := dialects.IsGalera(pctx, SQLExecutor(sdb))
		if err != nil {
			sdb.Close()
			return nil, fmt.Errorf("%w to %s: %s", ErrUnreachable, shown, redactErr(err, dsn))
		}
		if galera {
			d = galeraDialect(o.GaleraSingleWriter)
			if o.GaleraSingleWriter {
				if writer, err = startGaleraWriter(pctx, poolExecutor(sdb, nil, dialects.Galera)); err != nil {
					return fail(fmt.Errorf("%s: %w", shown, err))
				}
				d = dialects.NewGaleraWriter(writer.check)
			}
			if !o.GaleraSingleWriter {
				// Causal reads: a statement waits until this node has
				// applied what the cluster committed before it, so an
				// UPDATE never misses a row written on another node.
				cfg, err := mysql.ParseDSN(driverDSN)
				if err == nil && cfg.Params["wsrep_sync_wait"] == "" {
					if cfg.Params == nil {
						cfg.Params = map[string]string{}
					}
					cfg.Params["wsrep_sync_wait"] = dialects.GaleraSyncWait
					driverDSN = cfg.FormatDSN()
					sdb.Close()
					if sdb, err = openPool(d, driverDSN); err != nil {
						return nil, fmt.Errorf("%w %s: %v", ErrBadDSN, shown, redactErr(err, dsn))
					}
					setPool(sdb, o)
				}
			}
		}
	}
	if !o.AllowReadOnly {
		var ro bool
		if err := sdb.QueryRowContext(pctx, d.Q.ReadOnly).Scan(&ro); err != nil {
			return fail(fmt.Errorf("%w to %s: %s", ErrUnreachable, shown, redactErr(err, dsn)))
		}
		if ro {
			return fail(readOnlyError(shown, nil, dsn))
		}
	}
	if o.RequireSyncReplication {
		if err := requireSync(pctx, d, SQLExecutor(sdb)); err != nil {
			return fail(fmt.Errorf("%s: %w", shown, err))
		}
	}
	db := &DB{DB: sqlx.NewDb(sdb, d.DriverName()), dialect: d, pre: poolerArgs(sdb, o.Pooler), dsn: driverDSN, shown: shown, writer: writer}
	if db.epochs, err = openEpochs(pctx, db, o.EpochFile, o.AllowReadOnly); err != nil {
		return fail(fmt.Errorf("%s: %w", shown, err))
	}
	return db, nil
}

// Close closes the pool (and, with GaleraSingleWriter, first releases
// this node's writer lease so another node can take over at once).
func (db *DB) Close() error {
	if db.writer != nil {
		db.writer.close()
	}
	return db.DB.Close()
}

// openEpochs reads the high-water mark from file and, when it says the
// client has seen a fork, checks the server against it (not on a server
// opened read-only, nor on one without the schema yet).
func openEpochs(ctx context.Context, db Base, file string, readOnly bool) (*Epochs, error) {
	e, err := newEpochs(file)
	if err != nil || e.Seen() == 0 || readOnly {
		return e, err
	}
	probe := &epochProbe{Base: db, e: e}
	if _, err := CurrentEpoch(ctx, probe); err != nil && !errors.Is(err, dialects.ErrNoSchema) {
		return nil, err
	}
	return e, nil
}

// epochProbe is db with the mark being opened (db's own is not set yet).
type epochProbe struct {
	Base
	e *Epochs
}

func (p *epochProbe) Epochs() *Epochs { return p.e }

// openPool opens a database/sql pool for the dialect's driver; MySQL-family
// connections reset what sqlcoord set on their session (sessionreset.go).
func openPool(d *dialects.Dialect, driverDSN string) (*sql.DB, error) {
	if d.Family() != "mysql" {
		return sql.Open(d.DriverName(), driverDSN)
	}
	cfg, err := mysql.ParseDSN(driverDSN)
	if err != nil {
		return nil, err
	}
	c, err := newMySQLConnector(cfg)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(c), nil
}

func galeraDialect(singleWriter bool) *dialects.Dialect {
	if singleWriter {
		return dialects.GaleraSingleWriter
	}
	return dialects.Galera
}

// Inspect asks db's server about itself: version, read-only, replication
// (synchronous or not, standbys, WAL timeline, Galera).
func Inspect(ctx context.Context, db Base) (dialects.ServerInfo, error) {
	return db.Dialect().Inspect(ctx, db.Executor())
}

func requireSync(ctx context.Context, d *dialects.Dialect, e Executor) error {
	info, err := d.Inspect(ctx, e)
	if err != nil {
		return err
	}
	if !info.Synchronous {
		return fmt.Errorf("%w: %s", dialects.ErrNotSynchronous, info.Detail)
	}
	return nil
}

// readOnlyError says the server refuses writes (matches
// dialects.ErrReadOnly).
func readOnlyError(shown string, err error, dsn string) error {
	msg := fmt.Sprintf("%v: %s is a hot standby or a read-only replica; connect to the primary (or set AllowReadOnly to inspect it)", dialects.ErrReadOnly, shown)
	if err != nil {
		msg += ": " + redactErr(err, dsn)
	}
	return redactedError{msg, dialects.ErrReadOnly}
}

// withPGParam sets a connection parameter in a PostgreSQL DSN (URL or
// key=value form) unless the DSN already sets it.
func withPGParam(dsn, key, value string) string {
	if strings.Contains(dsn, key+"=") {
		return dsn
	}
	if kvDSN.MatchString(dsn) && !strings.Contains(dsn, "://") {
		return dsn + " " + key + "=" + value
	}
	if strings.Contains(dsn, "?") {
		return dsn + "&" + key + "=" + value
	}
	return dsn + "?" + key + "=" + value
}

func setPool(db *sql.DB, o Options) {
	def := func(v, d int) int {
		if v <= 0 {
			return d
		}
		return v
	}
	defd := func(v, d time.Duration) time.Duration {
		if v <= 0 {
			return d
		}
		return v
	}
	db.SetMaxOpenConns(def(o.MaxOpenConns, 20))
	db.SetMaxIdleConns(def(o.MaxIdleConns, 10))
	db.SetConnMaxLifetime(defd(o.ConnMaxLifetime, 30*time.Minute))
	db.SetConnMaxIdleTime(defd(o.ConnMaxIdleTime, 5*time.Minute))
}

// String is the DSN with its password hidden.
func (db *DB) String() string { return db.shown }

// DSN returns the driver DSN sqlcoord opened (with the password), e.g. to
// hand to a child process in tests.
func (db *DB) DSN() string { return db.dsn }

// ParseDSN validates dsn and returns the dialect family ("postgres" or
// "mysql"), the DSN to give the database/sql driver, and a copy safe to
// print.
func ParseDSN(dsn string) (family, driverDSN, shown string, err error) {
	dsn = strings.TrimSpace(dsn)
	if dsn == "" {
		return "", "", "", fmt.Errorf("%w: empty (set --dsn or SQLCOORD_DSN)", ErrBadDSN)
	}
	lower := strings.ToLower(dsn)
	switch {
	case strings.HasPrefix(lower, "postgres://"), strings.HasPrefix(lower, "postgresql://"):
		return parsePostgres(dsn)
	case strings.HasPrefix(lower, "mysql://"), strings.HasPrefix(lower, "mariadb://"):
		rest := dsn[strings.Index(dsn, "://")+3:]
		if !strings.Contains(rest, "@tcp(") && !strings.Contains(rest, "@unix(") && !strings.HasPrefix(rest, "tcp(") {
			converted, cerr := mysqlURLToDSN(dsn)
			if cerr != nil {
				return "", "", "", cerr
			}
			rest = converted
		}
		return parseMySQL(rest, dsn)
	case strings.Contains(dsn, "://"):
		scheme := dsn[:strings.Index(dsn, "://")]
		return "", "", "", fmt.Errorf("%w: unknown scheme %q (use postgres://, postgresql:// or mysql://)", ErrBadDSN, scheme)
	case strings.Contains(dsn, "@tcp(") || strings.Contains(dsn, "@unix(") || strings.HasPrefix(dsn, "tcp("):
		return parseMySQL(dsn, dsn)
	case kvDSN.MatchString(dsn):
		// libpq key=value form ("host=db user=app password=… dbname=x")
		return parsePostgres(dsn)
	}
	return "", "", "", fmt.Errorf("%w: not a DSN sqlcoord knows (use postgres://user@host/db or mysql://user@tcp(host:3306)/db)", ErrBadDSN)
}

// kvDSN recognises a libpq key=value connection string.
var kvDSN = regexp.MustCompile(`^\s*[A-Za-z_]+\s*=`)

func parsePostgres(dsn string) (string, string, string, error) {
	shown := redact.DSN(dsn)
	if _, err := pgx.ParseConfig(dsn); err != nil {
		return "", "", "", fmt.Errorf("%w %s: %s", ErrBadDSN, shown, redactErr(err, dsn))
	}
	return "postgres", dsn, shown, nil
}

func parseMySQL(dsn, original string) (string, string, string, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "", "", "", fmt.Errorf("%w: mysql: %s", ErrBadDSN, redactErr(err, original))
	}
	if cfg.DBName == "" {
		return "", "", "", fmt.Errorf("%w: mysql: no database name (…/dbname)", ErrBadDSN)
	}
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	cfg.ClientFoundRows = true
	// One round trip per statement instead of prepare + execute + close,
	// and required on Galera (see dialects.Galera).
	cfg.InterpolateParams = true
	shownCfg := cfg.Clone()
	if shownCfg.Passwd != "" {
		shownCfg.Passwd = redact.Mask
	}
	return "mysql", cfg.FormatDSN(), "mysql://" + shownCfg.FormatDSN(), nil
}

// mysqlURLToDSN turns mysql://user:pass@host:port/db?x=y into the
// go-sql-driver form.
func mysqlURLToDSN(dsn string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return "", fmt.Errorf("%w: mysql URL: %s", ErrBadDSN, redactErr(err, dsn))
	}
	host := u.Host
	if host == "" {
		return "", fmt.Errorf("%w: mysql URL has no host", ErrBadDSN)
	}
	if u.Port() == "" {
		host += ":3306"
	}
	var user string
	if u.User != nil {
		user = u.User.Username()
		if p, ok := u.User.Password(); ok {
			user += ":" + p
		}
		user += "@"
	}
	q := ""
	if u.RawQuery != "" {
		q = "?" + u.RawQuery
	}
	return fmt.Sprintf("%stcp(%s)%s%s", user, host, u.Path, q), nil
}

// redactErr returns err's text with every secret of dsn and every URL
// userinfo removed.
func redactErr(err error, dsn string) string { return redact.Text(err.Error(), dsn) }
