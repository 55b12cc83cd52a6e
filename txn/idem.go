package txn

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/sqlcoord/sqlcoord/internal/errs"
	"github.com/sqlcoord/sqlcoord/internal/tracing"
	"go.opentelemetry.io/otel/attribute"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/dialects"
	"github.com/sqlcoord/sqlcoord/internal/valid"
)

var (
	// ErrInProgress: another request with the same key is running (its
	// transaction is open, or a two-phase key is pending and not stale).
	ErrInProgress = errors.New("txn: request with this idempotency key in progress")
	// ErrKeyReused: the key was used before for a different request
	// (fingerprint differs).
	ErrKeyReused = errors.New("txn: idempotency key reused with a different request")
	// ErrNotOwner: Complete/Finish for a key that is not pending (already
	// done, or never begun).
	ErrNotOwner = errors.New("txn: idempotency key is not pending")
	// ErrInvalidKey: empty, over-long, non-UTF-8 or NUL-containing scope
	// or key.
	ErrInvalidKey = errors.New("txn: invalid idempotency scope or key")
)

// Busy says what Begin does when a concurrent request holds the same key.
type Busy int

const (
	// Wait until the other transaction ends (then replay its response, or
	// run if it rolled back). The default.
	Wait Busy = iota
	// Fail at once with ErrInProgress.
	Fail
)

// KeysOptions tune Keys.
type KeysOptions struct {
	OnBusy Busy
	// LockFor is how long a pending key is protected before another
	// request may recover it (two-phase mode); default 5 minutes.
	LockFor time.Duration
}

// Keys manages idempotency keys in coord_idempotency, unique on
// (scope, key). A scope is a key space: per user, per tenant, per API.
type Keys[TTx any] struct {
	db  sqlcoord.Driver[TTx]
	q   dialects.Queries
	opt KeysOptions
	// table is coord_idempotency's layout as the last claim that found
	// out saw it (a dialects.KeyTable): a hint that saves a claim on a
	// table partitioned by period the plain table's statement.
	table atomic.Int32
}

// NewKeys returns a Keys for the driver (e.g. a *sqlcoord.DB); Begin and
// Complete take the driver's transaction type.
func NewKeys[TTx any](db sqlcoord.Driver[TTx], opt KeysOptions) *Keys[TTx] {
	if opt.LockFor == 0 {
		opt.LockFor = 5 * time.Minute
	}
	return &Keys[TTx]{db: db, q: db.Dialect().Q(), opt: opt}
}

// Claim is the outcome of Begin or Start.
type Claim struct {
	// Replay: the key completed before. Do not run the effect; answer
	// with Response.
	Replay   bool
	Response []byte
	// Recovered (two-phase): a stale pending key was taken over; the
	// previous attempt may or may not have performed its external effect.
	Recovered bool
}

// Fingerprint hashes the parts of a request that must match for a key to
// be replayed (method, path, body…).
func Fingerprint(parts ...[]byte) []byte {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:", len(p))
		h.Write(p)
	}
	return h.Sum(nil)
}

// Begin registers (scope, key) in the caller's transaction tx. When the
// returned Claim is not a Replay, run the effect in tx, call Complete in tx
// and commit: key and effect then commit or roll back together, and the
// unique index makes a second effect impossible. A concurrent duplicate
// waits for tx (or gets ErrInProgress with OnBusy: Fail); a completed key
// returns Replay with the stored response; the same key with a different
// fingerprint returns ErrKeyReused.
//
// On PostgreSQL, an error aborts tx; roll it back.
//
// Cost: Begin/Complete is the two-phase variant — the key row is written
// pending, then rewritten done, one statement more than a hand-written
// "INSERT … ON CONFLICT DO NOTHING" of the key after the effect; it ran at
// 0.70–0.80× that hand-written key on PostgreSQL and 0.52–0.61× on MariaDB
// at 1 and 32 clients (fsync on; `sqlcoord bench primitives --groups
// idempotency --slices 6`). That is the price of a duplicate waiting or
// replaying before it does anything: beside hand-written SQL with that
// guarantee (the key first, the effect, then the response) it ran at
// 0.90–0.94× (PostgreSQL) and 0.84–0.89× (MariaDB). When the effect lives
// in this database and a duplicate may do it and roll it back, use Record:
// one INSERT, 0.79–1.03× the hand-written key.
func (k *Keys[TTx]) Begin(ctx context.Context, tx TTx, scope, key string, fingerprint []byte) (_ Claim, retErr error) {
	ctx, end := tracing.Start(ctx, k.db, "keys.begin", k.db.Dialect(), attribute.String("sqlcoord.scope", scope))
	defer func() { end(retErr) }()
	if err := validKey(scope, key); err != nil {
		return Claim{}, err
	}
	if k.opt.LockFor < 0 {
		return Claim{}, errs.Errorf("%w: negative KeysOptions.LockFor %v", ErrInvalidOptions, k.opt.LockFor)
	}
	if len(fingerprint) > 64 {
		return Claim{}, errs.Errorf("%w: fingerprint over 64 bytes (use Fingerprint)", ErrInvalidKey)
	}
	if fingerprint == nil {
		fingerprint = []byte{}
	}
	d := k.db.Dialect()
	x := k.db.TxExecutor(tx)
	lock := k.opt.LockFor.Microseconds()
	inserted, c, locked, err := k.claim(ctx, x, "begin", dialects.IdemKey{Scope: scope, Key: key, Fingerprint: fingerprint, LockMicros: lock, NoWait: k.opt.OnBusy == Fail}, nil)
	if err != nil || inserted || c.Replay {
		return c, err
	}
	if locked {
		return Claim{}, errs.Errorf("txn: key %s/%s: %w", scope, key, ErrInProgress)
	}
	n, err := x.Exec(ctx, k.q.IdemTakeover, lock, fingerprint, scope, key)
	if err != nil {
		return Claim{}, errs.Errorf("txn: recover key %s/%s: %w", scope, key, d.Classify(err))
	}
	if n > 0 { // a row in each period the key holds
		return Claim{Recovered: true}, nil
	}
	return Claim{}, errs.Errorf("txn: key %s/%s: %w", scope, key, ErrInProgress)
}

// Record is the write-once mode, for a request whose effect lives in this
// database: do the effect in tx first, then Record the key with the
// response, then commit — one INSERT, the cheapest correct pattern (no
// pending row written and rewritten). The guarantees are Begin's: key and
// effect commit or roll back together and the unique index makes a second
// effect impossible; a concurrent duplicate's Record waits for tx at the
// index (whatever OnBusy says) and then sees the key done.
//
// When the key was recorded before, Record returns a Claim with Replay set
// and the stored Response: the effect just done in tx is a duplicate —
// roll tx back and answer with Response. ErrKeyReused: the key was used
// with another fingerprint (roll back too). ErrInProgress: a two-phase
// key (Start) is pending.
//
// Versus Begin/Complete: a duplicate does its effect before it learns it
// is one (then rolls it back); with Begin it waits or replays before
// doing anything. Use Begin when the effect is costly or not only in this
// database.
func (k *Keys[TTx]) Record(ctx context.Context, tx TTx, scope, key string, fingerprint, response []byte) (_ Claim, retErr error) {
	ctx, end := tracing.Start(ctx, k.db, "keys.record", k.db.Dialect(), attribute.String("sqlcoord.scope", scope))
	defer func() { end(retErr) }()
	if err := validKey(scope, key); err != nil {
		return Claim{}, err
	}
	if len(fingerprint) > 64 {
		return Claim{}, errs.Errorf("%w: fingerprint over 64 bytes (use Fingerprint)", ErrInvalidKey)
	}
	if fingerprint == nil {
		fingerprint = []byte{}
	}
	if response == nil {
		response = []byte{}
	}
	x := k.db.TxExecutor(tx)
	inserted, c, _, err := k.claim(ctx, x, "record", dialects.IdemKey{Scope: scope, Key: key, Fingerprint: fingerprint}, response)
	if err != nil || inserted || c.Replay {
		return c, err
	}
	return Claim{}, errs.Errorf("txn: key %s/%s: %w", scope, key, ErrInProgress)
}

// claim inserts key in x, pending (response nil) or done with response
// (op names the call in errors): inserted when it was new, else the key as
// it exists (see existing). A key gone by the time it is read is claimed
// again, claimTries times in all. Each claim passes the layout of the
// table the last one saw and keeps the one it sees. With key.NoWait, a key
// another transaction holds is ErrInProgress at once.
func (k *Keys[TTx]) claim(ctx context.Context, x dialects.Executor, op string, key dialects.IdemKey, response []byte) (inserted bool, c Claim, locked bool, err error) {
	d := k.db.Dialect()
	for try := 1; ; try++ {
		key.Table = dialects.KeyTable(k.table.Load())
		var r dialects.IdemResult
		if response == nil {
			r, err = d.IdemInsert(ctx, x, key)
		} else {
			r, err = d.IdemRecord(ctx, x, key, response)
		}
		if err != nil {
			cerr := d.Classify(err)
			if key.NoWait && errors.Is(cerr, sqlcoord.ErrLockTimeout) {
				return false, Claim{}, false, errs.Errorf("txn: key %s/%s: %w", key.Scope, key.Key, ErrInProgress)
			}
			return false, Claim{}, false, errs.Errorf("txn: %s key %s/%s: %w", op, key.Scope, key.Key, cerr)
		}
		if r.Table != dialects.KeyTableUnknown && r.Table != key.Table {
			k.table.Store(int32(r.Table))
		}
		if r.Inserted {
			return true, Claim{}, false, nil
		}
		var gone bool
		if c, locked, gone, err = k.existing(ctx, x, key.Scope, key.Key, key.Fingerprint); !gone || try == claimTries {
			return false, c, locked, err
		}
	}
}

// claimTries is how many times Begin and Record claim a key that was gone
// when they read it after their claim met it.
const claimTries = 3

// existing reads a key that was there when we tried to insert it: a
// Replay claim when it is done, ErrKeyReused for another fingerprint,
// otherwise whether its pending claim is still protected (locked). gone
// (with an ErrInProgress error): the key was there no more — abandoned,
// cleaned up, or its partition dropped since the claim met it (the claim
// it met ran at least a period before) — and claiming it again is right.
func (k *Keys[TTx]) existing(ctx context.Context, x dialects.Executor, scope, key string, fingerprint []byte) (c Claim, locked, gone bool, err error) {
	var fp, resp []byte
	var state string
	if err := x.QueryRow(ctx, k.q.IdemRead, scope, key).Scan(&fp, &state, &resp, &locked); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return Claim{}, false, true, errs.Errorf("txn: key %s/%s vanished; retry: %w", scope, key, ErrInProgress)
		}
		return Claim{}, false, false, errs.Errorf("txn: read key %s/%s: %w", scope, key, k.db.Dialect().Classify(err))
	}
	if !bytes.Equal(fp, fingerprint) {
		return Claim{}, false, false, errs.Errorf("txn: key %s/%s: %w", scope, key, ErrKeyReused)
	}
	if state == "done" {
		return Claim{Replay: true, Response: resp}, false, false, nil
	}
	return Claim{}, locked, false, nil
}

// Complete stores the response and marks the key done, in tx (the
// transaction of Begin, or any later one in two-phase mode).
func (k *Keys[TTx]) Complete(ctx context.Context, tx TTx, scope, key string, response []byte) (retErr error) {
	ctx, end := tracing.Start(ctx, k.db, "keys.complete", k.db.Dialect(), attribute.String("sqlcoord.scope", scope))
	defer func() { end(retErr) }()
	return k.complete(ctx, k.db.TxExecutor(tx), "complete", scope, key, response)
}

// complete marks a pending key done on x (the caller's transaction, or the
// pool for Finish).
func (k *Keys[TTx]) complete(ctx context.Context, x dialects.Executor, op, scope, key string, response []byte) error {
	if err := validKey(scope, key); err != nil {
		return err
	}
	n, err := x.Exec(ctx, k.q.IdemComplete, response, scope, key)
	if err != nil {
		return errs.Errorf("txn: %s key %s/%s: %w", op, scope, key, k.db.Dialect().Classify(err))
	}
	if n == 0 {
		return errs.Errorf("txn: %s key %s/%s: %w", op, scope, key, ErrNotOwner)
	}
	return nil
}

// Start is the first phase for effects outside the database (an HTTP call):
// it commits the key as pending, protected for LockFor, in its own short
// transaction. Then perform the effect and call Finish (or Abandon if it
// certainly did not happen). A pending key whose protection expired (the
// process died) is taken over by the next Start, with Recovered set: check
// with the external system (pass the same key to it) before acting again.
func (k *Keys[TTx]) Start(ctx context.Context, scope, key string, fingerprint []byte) (Claim, error) {
	var c Claim
	err := Do(ctx, k.db, Options{}, func(ctx context.Context, tx TTx) error {
		var err error
		c, err = k.Begin(ctx, tx, scope, key, fingerprint)
		return err
	})
	return c, err
}

// Finish marks a Start-ed key done with its response.
func (k *Keys[TTx]) Finish(ctx context.Context, scope, key string, response []byte) error {
	return k.complete(ctx, k.db.Executor(), "finish", scope, key, response)
}

// Abandon deletes a pending key so that a retry runs the effect again. Only
// call it when the effect certainly did not happen.
func (k *Keys[TTx]) Abandon(ctx context.Context, scope, key string) error {
	if err := validKey(scope, key); err != nil {
		return err
	}
	n, err := k.db.Executor().Exec(ctx, k.q.IdemAbandon, scope, key)
	if err != nil {
		return errs.Errorf("txn: abandon key %s/%s: %w", scope, key, k.db.Dialect().Classify(err))
	}
	if n == 0 {
		return errs.Errorf("txn: abandon key %s/%s: %w", scope, key, ErrNotOwner)
	}
	return nil
}

// Cleanup deletes done keys created more than age ago, batch rows per
// statement, so it never holds many locks or blocks new keys. A request
// replayed after its key was cleaned up runs again: keep age above your
// clients' retry horizon.
func (k *Keys[TTx]) Cleanup(ctx context.Context, age time.Duration, batch int) (int64, error) {
	return cleanup(ctx, k.db, k.q.IdemCleanup, age, batch)
}

// validKey refuses a scope or key that is empty, over 255 bytes, not UTF-8
// or contains NUL. Both are compared byte for byte: "id-7" and "id-7 " are
// different keys.
func validKey(scope, key string) error {
	if err := valid.Text("idempotency scope", scope, 255); err != nil {
		return errs.Errorf("%w: %w", ErrInvalidKey, err)
	}
	if err := valid.Text("idempotency key", key, 255); err != nil {
		return errs.Errorf("%w: %w", ErrInvalidKey, err)
	}
	return nil
}
