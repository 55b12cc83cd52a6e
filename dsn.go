package sqlcoord

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/sqlcoord/sqlcoord/internal/errs"
	"github.com/sqlcoord/sqlcoord/internal/redact"
)

// ParseDSN validates the shape of dsn and returns the dialect family
// ("postgres" or "mysql"), the DSN to give the database/sql driver (for
// MySQL/MariaDB with the parameters sqlcoord needs: parseTime, loc=UTC,
// clientFoundRows, interpolateParams), and a copy safe to print. The
// driver checks the rest when the pool is opened. Accepted forms:
//
//	postgres://user:pass@host:5432/db?sslmode=disable   (also postgresql://)
//	host=h port=5432 user=u password=p dbname=db           (libpq key=value)
//	mysql://user:pass@tcp(host:3306)/db?opt=...          (go-sql-driver form behind mysql://)
//	mysql://user:pass@host:3306/db                        (URL form; also mariadb://)
//	user:pass@tcp(host:3306)/db                           (plain go-sql-driver form)
func ParseDSN(dsn string) (family, driverDSN, shown string, err error) {
	dsn = strings.TrimSpace(dsn)
	if dsn == "" {
		return "", "", "", errs.Errorf("%w: empty (set --dsn or SQLCOORD_DSN)", ErrBadDSN)
	}
	lower := strings.ToLower(dsn)
	switch {
	case strings.HasPrefix(lower, "postgres://"), strings.HasPrefix(lower, "postgresql://"):
		if err := ambiguousUserinfo(dsn); err != nil {
			return "", "", "", err
		}
		if _, err := url.Parse(dsn); err != nil {
			return "", "", "", errs.Errorf("%w %s: %s", ErrBadDSN, redact.DSN(dsn), redactErr(err, dsn))
		}
		return "postgres", dsn, redact.DSN(dsn), nil
	case strings.HasPrefix(lower, "mysql://"), strings.HasPrefix(lower, "mariadb://"):
		rest := dsn[strings.Index(dsn, "://")+3:]
		if !strings.Contains(rest, "@tcp(") && !strings.Contains(rest, "@unix(") {
			if err := ambiguousUserinfo(dsn); err != nil {
				return "", "", "", err
			}
		}
		if !strings.Contains(rest, "@tcp(") && !strings.Contains(rest, "@unix(") && !strings.HasPrefix(rest, "tcp(") {
			converted, cerr := mysqlURLToDSN(dsn)
			if cerr != nil {
				return "", "", "", cerr
			}
			rest = converted
		}
		return parseMySQL(rest)
	case strings.Contains(dsn, "://"):
		scheme := dsn[:strings.Index(dsn, "://")]
		return "", "", "", errs.Errorf("%w: unknown scheme %q (use postgres://, postgresql:// or mysql://)", ErrBadDSN, redact.Text(scheme))
	case strings.Contains(dsn, "@tcp(") || strings.Contains(dsn, "@unix(") || strings.HasPrefix(dsn, "tcp("):
		return parseMySQL(dsn)
	case kvDSN.MatchString(dsn):
		// libpq key=value form ("host=db user=app password=… dbname=x")
		return "postgres", dsn, redact.DSN(dsn), nil
	}
	return "", "", "", errs.Errorf("%w: not a DSN sqlcoord knows (use postgres://user@host/db or mysql://user@tcp(host:3306)/db)", ErrBadDSN)
}

// kvDSN recognises a libpq key=value connection string.
var kvDSN = regexp.MustCompile(`^\s*[A-Za-z_]+\s*=`)

// mysqlParams are what sqlcoord needs of go-sql-driver on every MySQL
// pool it opens: DATETIME as time.Time in UTC, rows affected counting
// matched rows, and one round trip per statement (required on Galera).
var mysqlParams = [][2]string{{"parseTime", "true"}, {"loc", "UTC"}, {"clientFoundRows", "true"}, {"interpolateParams", "true"}}

// parseMySQL splits a go-sql-driver DSN the way the driver does —
// [user[:password]@][net[(addr)]]/dbname[?param=value&…], the database
// name after the last '/' — and sets sqlcoord's parameters.
func parseMySQL(dsn string) (string, string, string, error) {
	slash := strings.LastIndex(dsn, "/")
	if slash < 0 {
		return "", "", "", errs.Errorf("%w: mysql: no database name (…/dbname)", ErrBadDSN)
	}
	name, query, _ := strings.Cut(dsn[slash+1:], "?")
	if name == "" {
		return "", "", "", errs.Errorf("%w: mysql: no database name (…/dbname)", ErrBadDSN)
	}
	out := dsn[:slash+1] + name + "?" + setParams(query, mysqlParams...)
	return "mysql", out, "mysql://" + redact.DSN(out), nil
}

// setParams returns the &-separated parameters query with each key set to
// its value (replacing an existing value, else appended), order kept.
func setParams(query string, kv ...[2]string) string {
	var parts []string
	if query != "" {
		parts = strings.Split(query, "&")
	}
	for _, p := range kv {
		found := false
		for i, part := range parts {
			if k, _, _ := strings.Cut(part, "="); k == p[0] {
				parts[i] = p[0] + "=" + p[1]
				found = true
			}
		}
		if !found {
			parts = append(parts, p[0]+"="+p[1])
		}
	}
	return strings.Join(parts, "&")
}

// mysqlParam reads one parameter of a go-sql-driver DSN ("" if unset).
func mysqlParam(dsn, key string) string {
	slash := strings.LastIndex(dsn, "/")
	_, query, _ := strings.Cut(dsn[slash+1:], "?")
	for _, part := range strings.Split(query, "&") {
		if k, v, _ := strings.Cut(part, "="); k == key {
			return v
		}
	}
	return ""
}

// WithMySQLParam sets one parameter of a go-sql-driver DSN (for a
// migration's multiStatements, say).
func withMySQLParam(dsn, key, value string) string {
	slash := strings.LastIndex(dsn, "/")
	name, query, _ := strings.Cut(dsn[slash+1:], "?")
	return dsn[:slash+1] + name + "?" + setParams(query, [2]string{key, value})
}

// mysqlURLToDSN turns mysql://user:pass@host:port/db?x=y into the
// go-sql-driver form.
func mysqlURLToDSN(dsn string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return "", errs.Errorf("%w: mysql URL: %s", ErrBadDSN, redactErr(err, dsn))
	}
	host := u.Host
	if host == "" {
		return "", errs.Errorf("%w: mysql URL has no host", ErrBadDSN)
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

// redactErr returns err's text with every secret of dsn and every URL
// userinfo removed.
func redactErr(err error, dsn string) string { return redact.Text(quietTLS(err.Error()), dsn) }

// quietTLS drops pgx's "tls error: server refused TLS connection" lines
// from a connect error that has other lines: with sslmode=prefer (the
// default) a server without TLS refuses the first attempt, and the
// attempt without TLS that follows holds the real error.
func quietTLS(msg string) string {
	const noise = "tls error: server refused TLS connection"
	lines := strings.Split(msg, "\n")
	if len(lines) < 3 || !strings.Contains(msg, noise) {
		return msg
	}
	kept := lines[:1]
	for _, l := range lines[1:] {
		if !strings.Contains(l, noise) {
			kept = append(kept, l)
		}
	}
	if len(kept) == 2 {
		return kept[0] + " " + strings.TrimSpace(kept[1])
	}
	return strings.Join(kept, "\n")
}

// pgPort is the one TCP port a PostgreSQL DSN names (5432 when it names
// none), 0 when it names several hosts or ports (then nothing is
// compared).
func pgPort(dsn string) int {
	port := ""
	if kvDSN.MatchString(dsn) && !strings.Contains(dsn, "://") {
		for _, f := range strings.Fields(dsn) {
			if k, v, ok := strings.Cut(f, "="); ok && k == "port" {
				port = strings.Trim(v, "'")
			}
			if k, v, ok := strings.Cut(f, "="); ok && k == "host" && strings.Contains(v, ",") {
				return 0
			}
		}
	} else {
		u, err := url.Parse(dsn)
		if err != nil || strings.Contains(u.Host, ",") {
			return 0
		}
		port = u.Port()
		if p := u.Query().Get("port"); p != "" {
			port = p
		}
	}
	if port == "" {
		return 5432
	}
	n, err := strconv.Atoi(port)
	if err != nil || strings.Contains(port, ",") {
		return 0
	}
	return n
}

// behindPooler reports whether a PostgreSQL DSN reaches the server
// through something that listens on another port — a pooler (PgBouncer)
// or a proxy: the port the server says the connection reached
// (inet_server_port()) is not the DSN's. It asks on a connection of its
// own without named prepared statements, so the probe leaves nothing on
// a pooler's server connections. False when it cannot tell (a Unix socket
// on the server side, several hosts in the DSN).
func behindPooler(ctx context.Context, name, driverDSN string) bool {
	want := pgPort(driverDSN)
	if want == 0 {
		return false
	}
	probe, err := sql.Open(name, withPGParam(driverDSN, "default_query_exec_mode", "exec"))
	if err != nil {
		return false
	}
	defer probe.Close()
	probe.SetMaxOpenConns(1)
	var port sql.NullInt64
	if err := probe.QueryRowContext(ctx, "SELECT inet_server_port()").Scan(&port); err != nil || !port.Valid {
		return false
	}
	return int(port.Int64) != want
}

// ambiguousUserinfo refuses a URL whose userinfo — up to the last @ — has
// a character a URL must escape there (@ # / ?): a parser would take part
// of the password for the host, a path or a fragment, connect elsewhere,
// and show it in its errors.
func ambiguousUserinfo(dsn string) error {
	rest := dsn[strings.Index(dsn, "://")+3:]
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return nil
	}
	if strings.ContainsAny(rest[:at], "@#/?") {
		return errs.Errorf("%w %s: the user or password has an unescaped @, #, / or ?: percent-encode it (%%40, %%23, %%2F, %%3F)", ErrBadDSN, redact.DSN(dsn))
	}
	return nil
}
