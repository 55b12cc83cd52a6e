package dialects

import (
	"errors"
	"net"
	"reflect"
	"regexp"
	"strconv"
)

// Driver errors are recognised by what they offer, not by importing the
// drivers: an application on pgx must not compile go-sql-driver/mysql,
// nor a MariaDB application pgx.
//
//   - pgx (pgconn.PgError): a SQLState() method; its Error() ends with
//     "(SQLSTATE xxxxx)" and carries the server's message.
//   - go-sql-driver/mysql (*mysql.MySQLError): no method beyond Error(),
//     which reads "Error 1205 (HY000): message" (or "Error 1205: message").

// sqlStater is pgconn.PgError (and any driver error that names a SQLSTATE).
type sqlStater interface {
	error
	SQLState() string
}

// mysqlErrorRe reads go-sql-driver's MySQLError text.
var mysqlErrorRe = regexp.MustCompile(`^Error (\d+)(?: \([0-9A-Z]{5}\))?: `)

// mysqlNumber finds a MySQL server error in err's chain and returns its
// number and message.
func mysqlNumber(err error) (int, string, bool) {
	var found error
	walk(err, func(e error) bool {
		if typeName(e) == "*mysql.MySQLError" {
			found = e
			return true
		}
		return false
	})
	if found == nil {
		return 0, "", false
	}
	m := mysqlErrorRe.FindStringSubmatch(found.Error())
	if m == nil {
		return 0, "", false
	}
	n, _ := strconv.Atoi(m[1])
	return n, found.Error()[len(m[0]):], true
}

// ErrorPosition is where in a statement's text PostgreSQL located err:
// the 1-based character position of the *pgconn.PgError in err's chain
// (0: none, or another driver).
func ErrorPosition(err error) int {
	pos := 0
	walk(err, func(e error) bool {
		if typeName(e) != "*pgconn.PgError" {
			return false
		}
		if f := reflect.ValueOf(e).Elem().FieldByName("Position"); f.IsValid() && f.CanInt() {
			pos = int(f.Int())
		}
		return true
	})
	return pos
}

// hasType reports whether an error of the named type (as %T prints it)
// is in err's chain.
func hasType(err error, name string) bool {
	return walk(err, func(e error) bool { return typeName(e) == name })
}

// hasText reports whether an error whose whole text is msg is in err's
// chain (a driver's errors.New sentinel, e.g. mysql.ErrInvalidConn).
func hasText(err error, msg string) bool {
	return walk(err, func(e error) bool { return e.Error() == msg })
}

func typeName(e error) string { return reflect.TypeOf(e).String() }

// walk calls f on err and everything it wraps, depth first, until f
// returns true.
func walk(err error, f func(error) bool) bool {
	if err == nil {
		return false
	}
	if f(err) {
		return true
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return walk(u.Unwrap(), f)
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if walk(e, f) {
				return true
			}
		}
	}
	return false
}

// connectFailed reports whether err is a failure to open a connection —
// pgx's *pgconn.ConnectError (refused, 57P03 not yet accepting
// connections, a failed login) or a dial error (go-sql-driver) — so that
// no statement was sent.
func connectFailed(err error) bool {
	if hasType(err, "*pgconn.ConnectError") {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
