// Package coord provides row locks, leases with fencing tokens and fenced
// writes whose safety is enforced by the database:
//
//   - a lock (TryLock, Lock) is taken in the caller's transaction — on
//     PostgreSQL a transaction-scoped advisory lock on the name's permanent
//     id in coord_locks (nothing written), on MySQL/MariaDB a SELECT … FOR
//     UPDATE of the name's row: the server refuses a second holder while
//     that transaction lives and frees it the moment the holder's session
//     ends (commit, rollback, crash, killed connection);
//   - a lease (Acquire, Renew, Release) outlives transactions; every new
//     ownership gets a strictly larger fencing token, decided by one atomic
//     statement using the database clock;
//   - a fenced write (Fence, FencedUpdate) is a conditional update in the
//     same transaction as the business write that the database rejects when
//     it carries a token older than one already seen.
//
// What the lease alone does not cover: a holder that pauses past its expiry
// still believes it holds the lease until it next talks to the database.
// Only fenced writes make that holder harmless; KeepAlive merely makes it
// stop sooner.
package coord

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/dialects"
	"github.com/sqlcoord/sqlcoord/internal/errs"
	"github.com/sqlcoord/sqlcoord/internal/valid"
)

// Errors returned by this package, in addition to the shared sentinels in
// the root package sqlcoord (sqlcoord.ErrLocked, ErrLockTimeout, ErrNoSchema, ...).
var (
	// ErrStaleToken: a fenced write carried a token older than the fence.
	ErrStaleToken = errors.New("coord: stale fencing token")
	// ErrLeaseHeld: the lease is held by another live owner. It also
	// matches sqlcoord.ErrLocked.
	ErrLeaseHeld = errors.New("coord: lease held by another owner")
	// ErrLeaseLost: renew or release by someone who is no longer the owner
	// (expired, taken over, or already released).
	ErrLeaseLost = errors.New("coord: lease lost")
	// ErrInvalidName: empty, over-long (> 255 bytes), non-UTF-8 or
	// NUL-containing name.
	ErrInvalidName = errors.New("coord: invalid name")
	// ErrInvalidToken: a fencing token that is zero or negative.
	ErrInvalidToken = errors.New("coord: invalid fencing token")
	// ErrLockIsolation: see sqlcoord.ErrLockIsolation.
	ErrLockIsolation = sqlcoord.ErrLockIsolation
	// ErrInvalidTTL: a TTL or wait that is zero, negative or out of range.
	ErrInvalidTTL = errors.New("coord: invalid duration")
)

// MaxNameLen is the longest lock, lease or resource name, in bytes.
const MaxNameLen = 255

// Client runs coord's statements for one database through the
// application's stack: TTx is the stack's transaction type (*sql.Tx for a
// *sqlcoord.DB, *sqlx.Tx for sqlxdriver.Wrap, pgx.Tx for
// pgxv5.Wrap), and the helpers that must run inside the caller's
// transaction (TryLock, Lock, Fence, Update, SetIdleTimeout) take only
// that — a pool there does not compile. It is safe for concurrent use.
type Client[TTx any] struct {
	*Leases
	tx sqlcoord.Driver[TTx]
}

// Leases is the part of a Client that needs no transaction of the
// caller's: leases (Acquire, AcquireWait, Renew, Release, KeepAlive),
// their queues, lock cleanup and the listings. It works on any
// sqlcoord.Base — code that holds a Base rather than a typed driver
// (a relay, a scheduler) keeps its leases with it. It is safe for
// concurrent use.
type Leases struct {
	drv sqlcoord.Base
	d   *dialects.Dialect
	q   dialects.Queries
	w   *waiting // AcquireWait's, Campaign's, Acquire's and Observe's waiter
	opt ClientOptions

	names dialects.LockNames // lock names seen registered for the console (PostgreSQL)
}

// ClientOptions tune a Client's waiting and fencing; the zero value is
// sensible.
type ClientOptions struct {
	// Listener is where a PostgreSQL Client listens for its wake-ups —
	// typically pgxv5.NewDSNListener on a direct connection when the pool
	// goes through a transaction-mode pooler (PgBouncer), where LISTEN
	// cannot work. nil: the driver itself, when it can listen.
	Listener sqlcoord.Listener
	// PollInterval is how often a waiting Client that cannot be woken
	// (no listener; MySQL/MariaDB without the right to KILL QUERY the
	// Client's own sleeping connection) reads the queues it waits in:
	// one statement per interval and kind whatever the number of waits.
	// Default DefaultWaitPoll.
	PollInterval time.Duration
	// FenceGrace is how long a fenced write waits for a transaction that
	// holds the fence's row and sits idle before the database ends that
	// transaction's session (see Fence); default DefaultFenceGrace.
	// Negative: never.
	FenceGrace time.Duration
	// RevokeGrace is how long a transaction FenceLease admitted with a
	// lease may sit idle while a release or revocation of the lease waits
	// for it before its session is ended; default DefaultRevokeGrace.
	// Negative: never.
	RevokeGrace time.Duration
}

// New returns a Client for the driver (e.g. a *sqlcoord.DB), with
// options (at most one).
func New[TTx any](drv sqlcoord.Driver[TTx], opts ...ClientOptions) *Client[TTx] {
	return &Client[TTx]{Leases: NewLeases(drv, opts...), tx: drv}
}

// NewLeases returns the leases of a driver, whatever its transaction type,
// with options (at most one).
func NewLeases(b sqlcoord.Base, opts ...ClientOptions) *Leases {
	var o ClientOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	if o.FenceGrace == 0 {
		o.FenceGrace = DefaultFenceGrace
	}
	if o.RevokeGrace == 0 {
		o.RevokeGrace = DefaultRevokeGrace
	}
	return &Leases{drv: b, d: b.Dialect(), q: b.Dialect().Q(), w: newWaiting(b, o), opt: o}
}

// pool runs autocommit statements.
func (c *Leases) pool() dialects.Executor { return c.drv.Executor() }

// validName refuses names that are empty, over MaxNameLen bytes, not
// UTF-8 or contain NUL. Names are compared byte for byte on both dialect.
func validName(kind, name string) error {
	if err := valid.Text(kind+" name", name, MaxNameLen); err != nil {
		return errs.Errorf("%w: %w", ErrInvalidName, err)
	}
	return nil
}

func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

func validDuration(what string, d time.Duration, min time.Duration) error {
	if d < min {
		return errs.Errorf("%w: %s %v must be at least %v", ErrInvalidTTL, what, d, min)
	}
	if d > 365*24*time.Hour {
		return errs.Errorf("%w: %s %v is over a year", ErrInvalidTTL, what, d)
	}
	return nil
}

// NewOwnerID returns a random, unguessable owner id (128 random bits,
// prefixed with host and pid for people reading the table).
func NewOwnerID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return ownerPrefix() + hex.EncodeToString(b[:])
}

// ownerPrefix is "host:pid:", read once: os.Hostname reads a file, three
// system calls on every Acquire without an owner otherwise.
var ownerPrefix = sync.OnceValue(func() string {
	host, _ := os.Hostname()
	if len(host) > 64 {
		host = host[:64]
	}
	return fmt.Sprintf("%s:%d:", host, os.Getpid())
})

// wrap classifies a driver error and names the operation.
func (c *Leases) wrap(op, name string, err error) error {
	if err == nil {
		return nil
	}
	return errs.Errorf("coord: %s %q: %w", op, truncate(name), c.d.Classify(err))
}
