// Package session keeps web sessions in the application's database
// (coord_sessions), enforced by the database like every sqlcoord helper:
//
//   - the client holds only an opaque random token; the row is keyed by its
//     SHA-256, so a dump of the table yields no usable cookie;
//   - idle and absolute expiry are computed and checked by the database
//     clock, never the client's;
//   - concurrent requests that modify one session never lose each other's
//     writes: Save is an UPDATE … WHERE version = ?, and a lost race is
//     ErrConflict (Update retries it);
//   - Rotate issues a new token and invalidates the old one in the same
//     transaction (session fixation: a token set before login is useless
//     after it); Revoke and RevokeAllForUser end sessions for every
//     instance at once, because every instance reads the same row;
//   - renewal slides the idle expiry only when more than half of the idle
//     window has passed, so most requests do not write.
//
// The store carries login context (user id, small data), not business
// data. Middleware sets cookies with Secure, HttpOnly and SameSite=Lax.
//
// What it does not cover: a stolen token is valid until it expires or is
// revoked (rotate on privilege change, keep timeouts short); under
// asynchronous replication a failover can lose recent session writes
// (README "What survives which failover").
package session

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"errors"
	"time"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/dialects"
	"github.com/sqlcoord/sqlcoord/internal/backoff"
	"github.com/sqlcoord/sqlcoord/internal/errs"
	"github.com/sqlcoord/sqlcoord/internal/sqlutil"
	"github.com/sqlcoord/sqlcoord/internal/valid"
	"github.com/sqlcoord/sqlcoord/txn"
)

var (
	// ErrNotFound: no live session for the token (unknown, expired by the
	// database clock, revoked or rotated away).
	ErrNotFound = errors.New("session: not found")
	// ErrConflict: the session changed since it was loaded (another
	// request saved first); load it again and reapply (Update does).
	ErrConflict = errors.New("session: changed concurrently")
	// ErrInvalid: bad options or arguments.
	ErrInvalid = errors.New("session: invalid")
)

// Options tune a Store. The zero value is sensible.
type Options struct {
	// IdleTimeout ends a session not used for this long; default 30m.
	IdleTimeout time.Duration
	// AbsoluteTimeout ends a session this long after it was created,
	// however active; default 24h.
	AbsoluteTimeout time.Duration
	// MaxUpdateAttempts bounds Update's retries on ErrConflict; default 10.
	MaxUpdateAttempts int
}

// Session is one session as the database returned it. Times are the
// database's clock.
type Session struct {
	UserID        string
	Data          []byte
	Version       int64 // grows with every Save: the optimistic lock
	CreatedAt     time.Time
	LastSeenAt    time.Time
	IdleExpiresAt time.Time
	AbsExpiresAt  time.Time

	hash  []byte
	dbNow time.Time // the database's clock when the row was read
}

// Store keeps sessions for one application stack.
type Store[TTx any] struct {
	db  sqlcoord.Driver[TTx]
	opt Options
}

// NewStore returns a store on db.
func NewStore[TTx any](db sqlcoord.Driver[TTx], opt Options) (*Store[TTx], error) {
	if opt.IdleTimeout < 0 || opt.AbsoluteTimeout < 0 || opt.MaxUpdateAttempts < 0 {
		return nil, errs.Errorf("%w: negative timeout or attempts (%+v)", ErrInvalid, opt)
	}
	if opt.IdleTimeout == 0 {
		opt.IdleTimeout = 30 * time.Minute
	}
	if opt.AbsoluteTimeout == 0 {
		opt.AbsoluteTimeout = 24 * time.Hour
	}
	if opt.MaxUpdateAttempts == 0 {
		opt.MaxUpdateAttempts = 10
	}
	if opt.IdleTimeout < time.Second || opt.AbsoluteTimeout < opt.IdleTimeout {
		return nil, errs.Errorf("%w: idle timeout %v must be at least 1s and at most the absolute timeout %v", ErrInvalid, opt.IdleTimeout, opt.AbsoluteTimeout)
	}
	return &Store[TTx]{db: db, opt: opt}, nil
}

// NewToken returns a fresh random session token (32 bytes, base64url).
func NewToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// hashToken is the row key of a token; the token itself is never stored.
func hashToken(token string) ([]byte, error) {
	if token == "" || len(token) > 512 {
		return nil, ErrNotFound
	}
	h := sha256.Sum256([]byte(token))
	return h[:], nil
}

func (s *Store[TTx]) wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, ErrNotFound) || errors.Is(err, ErrConflict) || errors.Is(err, ErrInvalid) {
		return err
	}
	return errs.Errorf("session: %s: %w", what, s.db.Dialect().Classify(err))
}

// Create starts a session for userID in tx (typically the login
// transaction) and returns its new token. userID may be "" for an
// anonymous session.
func (s *Store[TTx]) Create(ctx context.Context, tx TTx, userID string, data []byte) (string, Session, error) {
	if err := valid.Optional("user id", userID, 255); err != nil {
		return "", Session{}, errs.Errorf("%w: %w", ErrInvalid, err)
	}
	token, err := NewToken()
	if err != nil {
		return "", Session{}, err
	}
	h, _ := hashToken(token)
	if data == nil {
		data = []byte{}
	}
	x := s.db.TxExecutor(tx)
	q := s.db.Dialect().Q()
	if _, err := x.Exec(ctx, q.WebSessionInsert, h, userID, data, s.opt.IdleTimeout.Microseconds(),
		s.opt.AbsoluteTimeout.Microseconds(), s.opt.AbsoluteTimeout.Microseconds()); err != nil {
		return "", Session{}, s.wrap("create", err)
	}
	sess, err := s.get(ctx, x, h, false)
	return token, sess, s.wrap("create", err)
}

func (s *Store[TTx]) get(ctx context.Context, x dialects.Executor, h []byte, lock bool) (Session, error) {
	q := s.db.Dialect().Q().WebSessionGet
	if lock {
		q = s.db.Dialect().Q().WebSessionGetForUpdate
	}
	sess := Session{hash: h}
	err := x.QueryRow(ctx, q, h).Scan(&sess.UserID, &sess.Data, &sess.Version, &sess.CreatedAt, &sess.LastSeenAt,
		&sess.IdleExpiresAt, &sess.AbsExpiresAt, &sess.dbNow)
	if errors.Is(err, sql.ErrNoRows) {
		return Session{}, ErrNotFound
	}
	return sess, err
}

// Load returns the live session of token (ErrNotFound otherwise). When
// more than half of the idle window has passed since the last renewal it
// slides the idle expiry (one conditional UPDATE); otherwise it only
// reads.
func (s *Store[TTx]) Load(ctx context.Context, token string) (Session, error) {
	h, err := hashToken(token)
	if err != nil {
		return Session{}, err
	}
	x := s.db.Executor()
	sess, err := s.get(ctx, x, h, false)
	if err != nil {
		return Session{}, s.wrap("load", err)
	}
	// Renew only past half the idle window (by the database's clock); the
	// UPDATE re-checks it, so concurrent loads renew at most once.
	if sess.dbNow.Sub(sess.LastSeenAt) > s.opt.IdleTimeout/2 {
		n, err := x.Exec(ctx, s.db.Dialect().Q().WebSessionTouch, s.opt.IdleTimeout.Microseconds(), h, (s.opt.IdleTimeout / 2).Microseconds())
		if err != nil {
			return Session{}, s.wrap("renew", err)
		}
		if n == 1 {
			if sess, err = s.get(ctx, x, h, false); err != nil {
				return Session{}, s.wrap("load", err)
			}
		}
	}
	return sess, nil
}

// Save writes sess.Data in tx if the session is unchanged since sess was
// loaded (same version) and returns it as saved; ErrConflict if another
// request saved first, ErrNotFound if it ended meanwhile. It also slides
// the idle expiry.
func (s *Store[TTx]) Save(ctx context.Context, tx TTx, sess Session) (Session, error) {
	if sess.hash == nil {
		return Session{}, errs.Errorf("%w: a Session from Load, Create or Rotate is needed", ErrInvalid)
	}
	x := s.db.TxExecutor(tx)
	data := sess.Data
	if data == nil {
		data = []byte{}
	}
	n, err := x.Exec(ctx, s.db.Dialect().Q().WebSessionSave, data, s.opt.IdleTimeout.Microseconds(), sess.hash, sess.Version)
	if err != nil {
		return Session{}, s.wrap("save", err)
	}
	if n == 0 {
		if _, gerr := s.get(ctx, x, sess.hash, false); gerr != nil {
			return Session{}, s.wrap("save", gerr) // ended: ErrNotFound
		}
		return Session{}, ErrConflict
	}
	saved, err := s.get(ctx, x, sess.hash, false)
	return saved, s.wrap("save", err)
}

// Update loads token's session with its row locked, applies fn to its
// data and saves the result, in a transaction of its own: concurrent
// Updates queue on the row instead of racing, and none loses another's
// write. A Save that slipped in between (from Load + Save elsewhere) makes
// it retry from the load; fn may then run again and must not have other
// effects.
func (s *Store[TTx]) Update(ctx context.Context, token string, fn func(data []byte) ([]byte, error)) (Session, error) {
	h, err := hashToken(token)
	if err != nil {
		return Session{}, err
	}
	pause := backoff.Policy{Base: time.Millisecond, Max: 50 * time.Millisecond, Jitter: backoff.Full}
	for attempt := 0; ; attempt++ {
		var saved Session
		err := txn.Do(ctx, s.db, txn.Options{MaxAttempts: 1}, func(ctx context.Context, tx TTx) error {
			sess, err := s.get(ctx, s.db.TxExecutor(tx), h, true)
			if err != nil {
				return err
			}
			if sess.Data, err = fn(append([]byte(nil), sess.Data...)); err != nil {
				return err
			}
			saved, err = s.Save(ctx, tx, sess)
			return err
		})
		if !errors.Is(err, ErrConflict) || attempt+1 >= s.opt.MaxUpdateAttempts {
			return saved, err
		}
		if err := backoff.Sleep(ctx, pause.Delay(attempt)); err != nil {
			return Session{}, err
		}
	}
}

// Rotate gives token's session a new token in tx and makes the old one
// invalid in the same transaction — call it on login and on every
// privilege change (session fixation). userID, if not "", becomes the
// session's user (the login).
func (s *Store[TTx]) Rotate(ctx context.Context, tx TTx, token, userID string) (string, Session, error) {
	if err := valid.Optional("user id", userID, 255); err != nil {
		return "", Session{}, errs.Errorf("%w: %w", ErrInvalid, err)
	}
	h, err := hashToken(token)
	if err != nil {
		return "", Session{}, err
	}
	x := s.db.TxExecutor(tx)
	q := s.db.Dialect().Q()
	old, err := s.get(ctx, x, h, true)
	if err != nil {
		return "", Session{}, s.wrap("rotate", err)
	}
	if userID == "" {
		userID = old.UserID
	}
	newToken, err := NewToken()
	if err != nil {
		return "", Session{}, err
	}
	nh, _ := hashToken(newToken)
	if _, err := x.Exec(ctx, q.WebSessionCopy, nh, userID, old.Data, old.Version+1, old.CreatedAt,
		s.opt.IdleTimeout.Microseconds(), old.AbsExpiresAt, old.AbsExpiresAt); err != nil {
		return "", Session{}, s.wrap("rotate", err)
	}
	if _, err := x.Exec(ctx, q.WebSessionDelete, h); err != nil {
		return "", Session{}, s.wrap("rotate", err)
	}
	sess, err := s.get(ctx, x, nh, false)
	return newToken, sess, s.wrap("rotate", err)
}

// Revoke ends token's session (logout) for every instance at once. A
// token without a session is not an error.
func (s *Store[TTx]) Revoke(ctx context.Context, token string) error {
	h, err := hashToken(token)
	if err != nil {
		return nil
	}
	_, err = s.db.Executor().Exec(ctx, s.db.Dialect().Q().WebSessionDelete, h)
	return s.wrap("revoke", err)
}

// RevokeAllForUser ends every session of userID ("log out everywhere") and
// returns how many there were.
func (s *Store[TTx]) RevokeAllForUser(ctx context.Context, userID string) (int64, error) {
	if err := valid.Text("user id", userID, 255); err != nil {
		return 0, errs.Errorf("%w: %w", ErrInvalid, err)
	}
	n, err := s.db.Executor().Exec(ctx, s.db.Dialect().Q().WebSessionDeleteUser, userID)
	return n, s.wrap("revoke user", err)
}

// Stats counts sessions by the database clock.
type Stats struct {
	Live, Users, Expired int64
}

// Stats returns live sessions, distinct logged-in users and expired rows
// not yet cleaned up.
func (s *Store[TTx]) Stats(ctx context.Context) (Stats, error) {
	var st Stats
	err := s.db.Executor().QueryRow(ctx, s.db.Dialect().Q().WebSessionStats).Scan(&st.Live, &st.Users, &st.Expired)
	return st, s.wrap("stats", err)
}

// Cleanup deletes sessions expired for longer than grace, batch rows per
// statement (no long locks), and returns how many.
func Cleanup(ctx context.Context, db sqlcoord.Base, grace time.Duration, batch int) (int64, error) {
	return sqlutil.DeleteInBatches(ctx, db, sqlutil.Pace(db.CleanupPace()), db.Dialect().Q().WebSessionCleanup, grace, batch)
}
