package dialects

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// Dialect is what sqlcoord knows about one database family. The two values
// are Postgres (postgres.go) and MySQL / MariaDB (mysql.go); every SQL
// statement the library sends lives in Q and can be read in those files.
type Dialect struct {
	name     string // "postgres", "mysql" or "mariadb"
	family   string // "postgres" or "mysql"
	driver   string // database/sql driver name
	quote    string
	numbered bool // placeholders are $1, $2 (PostgreSQL) rather than ?
	classify func(error) error
	ops      Operations
	w        *waitSQL // waiting, FenceLease and Reap (waiting.go)
	parts    Partitioner
	keyParts KeyPartitioner
	// tokenCheck builds the condition of a fenced write that refuses a
	// token issued before the current failover epoch began (at or below
	// its base) and a stale primary (older than the client's high-water
	// mark hwm): placeholders of the token and of hwm.
	tokenCheck func(token, hwm string) string
	// epochBase builds the expression of the current epoch's base (see
	// EpochBase).
	epochBase func(hwm string) string

	// q holds the text of every statement sqlcoord sends to this dialect (Q).
	q *Queries
}

// Name is "postgres", "mysql" (MySQL 8) or "mariadb".
func (d *Dialect) Name() string { return d.name }

// Family is "postgres" or "mysql" (MariaDB belongs to the mysql family).
func (d *Dialect) Family() string { return d.family }

// DriverName is the database/sql driver this dialect uses ("pgx" or "mysql").
func (d *Dialect) DriverName() string { return d.driver }

func (d *Dialect) String() string { return d.name }

// Placeholder returns the n-th (1-based) bind parameter marker.
func (d *Dialect) Placeholder(n int) string {
	if d.numbered {
		return "$" + strconv.Itoa(n)
	}
	return "?"
}

// EpochBase returns an SQL expression (a BIGINT) for the base of the
// failover epoch the server writes in: every fencing token sqlcoord issues
// in that epoch is above it, and a token at or below it was issued on a
// history that ended (a promotion, restart or restore since; see
// docs/failover.md). hwm is a placeholder or literal of the client's
// high-water mark (0: none): on PostgreSQL a server in an older epoch
// raises SC001 (sqlcoord.ErrStalePrimary), on the MySQL family the
// expression is NULL — as it is there until the epoch of the server's
// current run was recorded (EpochCheck records it).
//
// For hand-written SQL that wants the guarantee sqlcoord's own fenced
// statements have (`… WHERE <EpochBase> < token`, or a counter issued as
// GREATEST(counter + 1, <EpochBase> + 1)); sqlcoord's benchmarks build
// their baselines of equal guarantee with it. The expression reads
// coord_forks (and, MySQL family, coord_run): the schema must be
// installed.
func (d *Dialect) EpochBase(hwm string) string { return d.epochBase(hwm) }

// Classify maps a driver error to an *Error carrying one of the sentinel
// errors, or returns err unchanged when it is nil or not one sqlcoord knows.
func (d *Dialect) Classify(err error) error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	return d.classify(err)
}

// ClassifyCommit classifies an error returned by COMMIT (or by an
// autocommit statement): a lost connection there means the outcome is
// unknown (ErrCommitUnknown), not a clean failure — unless no connection
// could be opened at all (refused, not yet accepting connections): then
// nothing was sent, and it is ErrUnreachable.
func (d *Dialect) ClassifyCommit(err error) error {
	if err != nil && connectFailed(err) {
		// nothing was sent: the pool could not open a connection
		return &Error{Kind: ErrUnreachable, Err: err}
	}
	err = d.Classify(err)
	if errors.Is(err, ErrConnLost) {
		var e *Error
		errors.As(err, &e)
		return &Error{Kind: ErrCommitUnknown, Code: e.Code, Err: e.Err}
	}
	return err
}

// identRe is what sqlcoord accepts as a caller-supplied table or column
// name: ASCII letters, digits and underscores, not starting with a digit,
// at most 63 characters (PostgreSQL's limit; MySQL allows 64).
var identRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// ErrInvalidIdent is returned for caller-supplied identifiers that are not
// plain names.
var ErrInvalidIdent = errors.New("sqlcoord: invalid identifier")

// QuoteIdent validates a caller-supplied table or column name and returns it
// quoted for this dialect. "schema.table" is accepted as two validated parts.
// Names are never spliced into SQL without passing through here.
func (d *Dialect) QuoteIdent(name string) (string, error) {
	parts := strings.Split(name, ".")
	if len(parts) > 2 {
		return "", fmt.Errorf("%w %q: at most one dot (schema.table)", ErrInvalidIdent, name)
	}
	for i, p := range parts {
		if !identRe.MatchString(p) {
			return "", fmt.Errorf("%w %q: use letters, digits and _ (not first), 1-63 characters", ErrInvalidIdent, name)
		}
		parts[i] = d.quote + p + d.quote
	}
	return strings.Join(parts, "."), nil
}

// ByFamily returns the dialect for "postgres"/"postgresql"/"pgx" or
// "mysql"/"mariadb".
func ByFamily(name string) (*Dialect, error) {
	registered.Lock()
	d := registered.m[name]
	registered.Unlock()
	if d != nil {
		return d, nil
	}
	switch strings.ToLower(name) {
	case "postgres", "postgresql", "pgx", "pg":
		return Postgres, nil
	case "mysql":
		return MySQL, nil
	case "mariadb":
		return MariaDB, nil
	case "galera", "mariadb-galera":
		return Galera, nil
	case "galera-single-writer", "mariadb-galera-single-writer":
		return GaleraSingleWriter, nil
	}
	return nil, fmt.Errorf("sqlcoord: unknown dialect %q (want postgres, mysql, mariadb, galera or galera-single-writer)", name)
}

// Q returns the text of every statement sqlcoord sends to this dialect: a
// copy, to read (and to build the same statements in a benchmark's
// baseline); what the dialect runs cannot be changed through it.
func (d *Dialect) Q() Queries { return *d.q }

// Operations returns the operations d runs: the starting point of a
// dialect that changes some of them (see Derive).
func (d *Dialect) Operations() Operations { return d.ops }

// Derive returns a dialect named name that runs ops with everything else
// of base: its statements (Q), error classification, waiting and
// failover-epoch checks. ops typically embeds base.Operations() and
// overrides what differs.
func Derive(base *Dialect, name string, ops Operations) *Dialect {
	d := *base
	d.name, d.ops = name, ops
	return &d
}

// ErrDialectName is returned by Register for a name already taken.
var ErrDialectName = errors.New("sqlcoord: dialect name taken")

var registered = struct {
	sync.Mutex
	m map[string]*Dialect
}{m: map[string]*Dialect{}}

// Register makes d available by its name to ByFamily, and so to
// sqlcoord.Options.Dialect: a pool opened with that name runs d (on a
// server of d's family). Names of the built-in dialects are refused.
func Register(d *Dialect) error {
	if _, err := ByFamily(d.name); err == nil {
		return fmt.Errorf("%w: %q", ErrDialectName, d.name)
	}
	registered.Lock()
	defer registered.Unlock()
	registered.m[d.name] = d
	return nil
}
