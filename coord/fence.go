package coord

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/sqlcoord/sqlcoord"

	"github.com/sqlcoord/sqlcoord/dialects"
	"github.com/sqlcoord/sqlcoord/internal/errs"
	"github.com/sqlcoord/sqlcoord/internal/tracing"
	"go.opentelemetry.io/otel/attribute"
)

// StaleTokenError reports a fenced write that the database refused.
type StaleTokenError struct {
	Resource string // resource name, or table/key for FencedUpdate
	Token    int64  // the token the write carried
	// Lease and NotHeld (FenceLease): the lease fenced with, and whether
	// it was refused because the lease is no longer held with Token.
	Lease   string
	NotHeld bool
}

func (e *StaleTokenError) Error() string {
	if e.NotHeld {
		return fmt.Sprintf("coord: write to %q with token %d refused: lease %q is no longer held with it (released, revoked, expired or taken over)", e.Resource, e.Token, truncate(e.Lease))
	}
	return fmt.Sprintf("coord: write to %q with token %d refused: a newer token has written, or the token was issued before the current failover epoch began (a promotion, restart or restore since)", e.Resource, e.Token)
}

// Is makes errors.Is(err, ErrStaleToken) true, and ErrLeaseLost too when
// the lease is no longer held.
func (e *StaleTokenError) Is(target error) bool {
	return target == ErrStaleToken || (e.NotHeld && target == ErrLeaseLost)
}

// Fence admits tx's writes to resource for token, or returns a
// *StaleTokenError (matching ErrStaleToken) when a newer token already
// wrote. It is a conditional update of the coord_fences row inside tx, so
// it holds that row's lock until tx ends: every write tx makes after Fence
// commits only if the fence held, and fenced transactions on one resource
// are serialised in token order. Equal tokens pass (one holder, many
// writes). The row is created on first use. A token at or below the
// current failover epoch's base is refused too: it was issued on a history
// that ended — before a promotion, a restart of the server or a restore
// (docs/failover.md) — and may have been issued again since.
//
// Use it as the first statement of the transaction that the lease
// protects. Whatever tx does to resource without calling Fence is not
// fenced.
func (c *Client[TTx]) Fence(ctx context.Context, tx TTx, resource string, token int64) (retErr error) {
	ctx, end := tracing.Start(ctx, c.drv, "fence", c.d, attribute.String("sqlcoord.name", resource))
	defer func() { end(retErr) }()
	if err := validName("resource", resource); err != nil {
		return err
	}
	if token <= 0 {
		return errs.Errorf("%w: fencing token %d must be positive", ErrInvalidToken, token)
	}
	var ok bool
	err := c.whileFencing(ctx, func(ctx context.Context) (err error) {
		ok, err = c.d.FenceAdvance(ctx, c.tx.TxExecutor(tx), resource, token, c.drv.Epochs().Seen())
		return err
	})
	if err != nil {
		return c.wrap("fence", resource, err)
	}
	if !ok {
		return &StaleTokenError{Resource: resource, Token: token}
	}
	return nil
}

// FenceLease is Fence for a lease the caller holds (an election's
// Leadership.Lease(), a semaphore Permit's Lease): it admits tx's writes
// to resource only while l is still held with l.Token — not released,
// revoked (Semaphore.SetPermits, Semaphore.Revoke), deposed or resigned
// (Election.Depose, Leadership.Resign), expired or taken over — checked
// in tx, and a release or revocation of the lease returns only after the
// transactions it admitted ended. So once Release, Revoke, SetPermits,
// Resign or Depose has returned, no write fenced with the lease commits,
// whether or not another holder has written since. The resource's fence
// also rises to the token, as Fence's does: a newer token's writes refuse
// this one's. A refusal is a *StaleTokenError matching ErrStaleToken and,
// when the lease is no longer held, ErrLeaseLost too.
//
// Use it as the first statement of tx (under REPEATABLE READ the check
// must not see an older snapshot). The release of the lease waits for tx
// (PostgreSQL: the lease's row is locked FOR KEY SHARE, which renewals do
// not wait for; MySQL/MariaDB: a row of coord_lease_gates), so keep
// fenced transactions short; one that sits idle past ClientOptions.
// RevokeGrace while a release of the lease waits for it has its session
// ended.
func (c *Client[TTx]) FenceLease(ctx context.Context, tx TTx, resource string, l Lease) (retErr error) {
	ctx, end := tracing.Start(ctx, c.drv, "fence.lease", c.d, attribute.String("sqlcoord.name", resource))
	defer func() { end(retErr) }()
	if err := validName("resource", resource); err != nil {
		return err
	}
	if err := validName("lease", l.Name); err != nil {
		return err
	}
	if l.Token <= 0 {
		return errs.Errorf("%w: fencing token %d must be positive", ErrInvalidToken, l.Token)
	}
	var r dialects.LeaseFence
	err := c.whileFencing(ctx, func(ctx context.Context) (err error) {
		r, err = c.d.FenceLease(ctx, c.tx.TxExecutor(tx), resource, dialects.LeaseSlot{Name: l.Name, Owner: l.Owner, Token: l.Token, HWM: c.drv.Epochs().Seen()})
		return err
	})
	if err != nil {
		return c.wrap("fence", resource, err)
	}
	if !r.Admitted {
		return &StaleTokenError{Resource: resource, Token: l.Token, Lease: l.Name, NotHeld: r.NotHeld}
	}
	return nil
}

// Defaults of ClientOptions.FenceGrace and RevokeGrace.
const (
	DefaultFenceGrace  = 500 * time.Millisecond
	DefaultRevokeGrace = 250 * time.Millisecond
)

// reapEvery is how often a statement blocked past its grace asks the
// database to end the sessions blocking it.
const reapEvery = 100 * time.Millisecond

// whileFencing runs a fenced statement in the caller's transaction; while
// it waits for the row lock of a transaction that has sat idle for
// FenceGrace — a holder frozen (SIGSTOP, a GC pause, a VM stall) or cut
// off inside its fenced transaction, whose lease has run out — the
// database ends that transaction's session (Dialect.Reap): it rolls back,
// nothing it wrote commits, and the write goes on within the grace instead
// of waiting until TCP notices the dead peer.
func (c *Leases) whileFencing(ctx context.Context, stmt func(context.Context) error) error {
	// a successor's write: the frozen holder has usually sat idle since
	// long before it started, so the first look comes early
	return c.reaping(ctx, dialects.MarkFence, min(c.opt.FenceGrace, reapEvery), c.opt.FenceGrace, stmt)
}

// whileRevoking runs a release or revocation; a transaction FenceLease
// admitted with the lease that it waits for and that has sat idle for
// RevokeGrace — its holder frozen or cut off — has its session ended.
func (c *Leases) whileRevoking(ctx context.Context, stmt func(context.Context) error) error {
	// the first look after RevokeGrace: a release blocked for less (on a
	// busy server, or by fenced writes about to commit) costs no read of
	// the server's sessions
	return c.reaping(ctx, dialects.MarkRevoke, c.opt.RevokeGrace, c.opt.RevokeGrace, stmt)
}

// revoking runs a revoking statement on the pool (see whileRevoking).
func (c *Leases) revoking(ctx context.Context, query string, args ...any) (int64, error) {
	var n int64
	err := c.whileRevoking(ctx, func(ctx context.Context) (err error) {
		n, err = c.pool().Exec(ctx, query, args...)
		return err
	})
	return n, err
}

// reaping runs stmt; from first on, and then every reapEvery until stmt
// returns, it ends the sessions that block stmt and sat idle in their
// transaction for grace.
func (c *Leases) reaping(ctx context.Context, marker string, first, grace time.Duration, stmt func(context.Context) error) error {
	if grace < 0 {
		return stmt(ctx)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	t := time.AfterFunc(first, func() {
		defer wg.Done()
		tick := time.NewTicker(reapEvery)
		defer tick.Stop()
		for {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			_, err := c.d.Reap(rctx, c.pool(), marker, grace)
			cancel()
			if err != nil && !errors.Is(c.d.Classify(err), sqlcoord.ErrQueryCanceled) {
				return // not allowed here (MySQL without PROCESS), or down
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	})
	err := stmt(ctx)
	close(done)
	if t.Stop() {
		wg.Done()
	}
	wg.Wait()
	return err
}

// FencedUpdate describes a fenced write to the caller's own table: a row
// identified by KeyColumn = Key, with a numeric FenceColumn holding the
// newest token that wrote it.
type FencedUpdate struct {
	Table       string         // "table" or "schema.table"; validated and quoted
	KeyColumn   string         // validated and quoted
	Key         any            // the row's key value
	FenceColumn string         // BIGINT column; validated and quoted
	Token       int64          // the writer's fencing token
	Set         map[string]any // other columns to set (names validated and quoted)
}

// Update runs
//
//	UPDATE table SET fence = token, col = val, … WHERE key = ? AND fence <= token
//
// in tx and returns a *StaleTokenError when no row matched: the row's fence
// is newer than Token (or no row has that key), or Token was issued before
// the current failover epoch began (as for Fence). An update that changes no
// value is accepted on every driver setting (on MySQL a 0-row result is
// checked with a locking read of the fence; clientFoundRows is not needed).
func (c *Client[TTx]) Update(ctx context.Context, tx TTx, u FencedUpdate) (retErr error) {
	ctx, end := tracing.Start(ctx, c.drv, "fence.update", c.d, attribute.String("sqlcoord.table", u.Table))
	defer func() { end(retErr) }()
	if u.Token <= 0 {
		return errs.Errorf("%w: fencing token %d must be positive", ErrInvalidToken, u.Token)
	}
	cols := make([]string, 0, len(u.Set))
	for k := range u.Set {
		cols = append(cols, k)
	}
	sort.Strings(cols)
	vals := make([]any, len(cols))
	for i, k := range cols {
		vals[i] = u.Set[k]
	}
	var ok bool
	err := c.whileFencing(ctx, func(ctx context.Context) (err error) {
		ok, err = c.d.FencedUpdateRow(ctx, c.tx.TxExecutor(tx), dialects.FencedRow{
			Table: u.Table, KeyColumn: u.KeyColumn, FenceColumn: u.FenceColumn,
			Columns: cols, Values: vals, Token: u.Token, Key: u.Key, HWM: c.drv.Epochs().Seen(),
		})
		return err
	})
	if err != nil {
		return c.wrap("fenced update", u.Table, err)
	}
	if !ok {
		return &StaleTokenError{Resource: fmt.Sprintf("%s[%v]", u.Table, u.Key), Token: u.Token}
	}
	return nil
}
