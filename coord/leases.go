package coord

import (
	"context"
	"fmt"
	"github.com/sqlcoord/sqlcoord/internal/core"
	"time"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/dialects"
	"github.com/sqlcoord/sqlcoord/internal/errs"
	"github.com/sqlcoord/sqlcoord/internal/tracing"
	"go.opentelemetry.io/otel/attribute"
)

// Lease is a held lease. Token is its fencing token: pass it to Fence or
// FencedUpdate with every write the lease protects.
type Lease struct {
	Name      string
	Owner     string
	Token     int64
	ExpiresAt time.Time // database time (UTC on MySQL)
	TTL       time.Duration

	// sentAt is when the request that granted ExpiresAt was sent (local
	// monotonic clock): KeepAlive counts validity from it.
	sentAt time.Time
}

// LeaseState is a lease row as the database sees it now.
type LeaseState struct {
	Owner     string
	Token     int64
	ExpiresAt time.Time
	Now       time.Time // the database's clock when read
	Live      bool      // ExpiresAt > Now
}

// MinTTL is the shortest lease TTL accepted.
const MinTTL = time.Millisecond

// Acquire takes the lease name for owner for ttl, in one short transaction
// that the Client owns. It succeeds when the lease is free, expired,
// released, or already held by owner (then it is extended and keeps its
// token). Every new ownership gets a token strictly larger than any token
// ever issued for name; tokens never go backwards, even after release.
// All expiry decisions use the database clock. When another owner holds a
// live lease, the error is a *LeaseHeldError (holder and expiry) matching
// ErrLeaseHeld.
//
// owner "" means a fresh NewOwnerID(). Reusing one owner id in several
// processes makes them one holder: don't.
//
// Acquire is fair to AcquireWait's waiters: while a waiter queued for the
// lease, a free lease goes to the waiter at the head of the queue, and
// Acquire by anyone else fails as if it were held (LeaseHeldError.Queued).
func (c *Leases) Acquire(ctx context.Context, name, owner string, ttl time.Duration) (_ Lease, retErr error) {
	ctx, end := tracing.Start(ctx, c.drv, "lease.acquire", c.d, attribute.String("sqlcoord.name", name))
	defer func() { end(retErr) }()
	return c.acquire(ctx, name, owner, ttl, "", nil)
}

// acquire is Acquire whose free lease goes to the head of queue ("": the
// lease's own; a semaphore's permits share its queue). w, when not nil,
// is the caller's wait in that queue: a grant may delete its ticket.
func (c *Leases) acquire(ctx context.Context, name, owner string, ttl time.Duration, queue string, w *wait) (Lease, error) {
	if err := validName("lease", name); err != nil {
		return Lease{}, err
	}
	owner, err := leaseOwner("lease TTL", ttl, owner)
	if err != nil {
		return Lease{}, err
	}
	l := Lease{Name: name, Owner: owner, TTL: ttl, sentAt: time.Now()}
	slot := dialects.LeaseSlot{Name: name, Owner: owner, TTLMicros: ttl.Microseconds(), HWM: c.drv.Epochs().Seen(), Queue: queue}
	if w != nil {
		slot.Ticket = c.w.ticket(w)
	}
	row, err := c.d.LeaseAcquire(ctx, c.pool(), slot)
	if err != nil {
		return Lease{}, c.wrap("acquire lease", name, err)
	}
	if row.TicketDropped {
		c.w.ticketDropped(w, slot.Ticket)
	}
	if err := core.ObserveEpoch(c.drv.Epochs(), row.Epoch); err != nil {
		return Lease{}, err
	}
	if row.Owner != owner {
		return Lease{}, &LeaseHeldError{Name: name, Holder: row.Owner, ExpiresAt: row.ExpiresAt, Queued: row.Queued}
	}
	l.Token, l.ExpiresAt = row.Token, row.ExpiresAt
	return l, nil
}

// LeaseHeldError: Acquire found the lease held by another live owner.
// It matches ErrLeaseHeld, and sqlcoord.ErrLocked for code written before
// it existed; it is not a transaction's lock.
type LeaseHeldError struct {
	Name      string
	Holder    string    // the owner id holding it (Queued: its last holder)
	ExpiresAt time.Time // when the holder's lease ends unless renewed (database clock)
	// Queued: the lease is free, but goes to a waiter that queued for it
	// before the caller (AcquireWait, Campaign, Semaphore.Acquire).
	Queued bool
}

func (e *LeaseHeldError) Error() string {
	if e.Queued {
		return fmt.Sprintf("coord: lease %q is free but promised to the waiter at the head of its queue", truncate(e.Name))
	}
	return fmt.Sprintf("coord: lease %q is held by %q until %s", truncate(e.Name), e.Holder, e.ExpiresAt.UTC().Format(time.RFC3339Nano))
}

// Is makes errors.Is(err, ErrLeaseHeld) and errors.Is(err, sqlcoord.ErrLocked) true.
func (e *LeaseHeldError) Is(target error) bool {
	return target == ErrLeaseHeld || target == sqlcoord.ErrLocked
}

// Renew extends a lease the caller still holds, by its TTL from the
// database's now. It fails with ErrLeaseLost when the lease expired, was
// released, or now belongs to another owner or token — even if the expired
// lease is still free, because a writer with this token may already have
// been overtaken; call Acquire for a new token instead.
func (c *Leases) Renew(ctx context.Context, l Lease) (_ Lease, retErr error) {
	ctx, end := tracing.Start(ctx, c.drv, "lease.renew", c.d, attribute.String("sqlcoord.name", l.Name))
	defer func() { end(retErr) }()
	if err := validDuration("lease TTL", l.TTL, MinTTL); err != nil {
		return l, err
	}
	if err := validName("lease", l.Name); err != nil {
		return l, err
	}
	l.sentAt = time.Now()
	r, err := c.d.LeaseRenew(ctx, c.pool(), dialects.LeaseSlot{Name: l.Name, Owner: l.Owner, Token: l.Token, TTLMicros: l.TTL.Microseconds(), HWM: c.drv.Epochs().Seen()})
	if err != nil {
		return l, c.wrap("renew lease", l.Name, err)
	}
	if !r.OK {
		return l, errs.Errorf("coord: renew lease %q: %w", truncate(l.Name), ErrLeaseLost)
	}
	if err := core.ObserveEpoch(c.drv.Epochs(), r.Epoch); err != nil {
		return l, err
	}
	l.ExpiresAt = r.ExpiresAt
	return l, nil
}

// Release ends a lease the caller holds, keeping its row so the next
// owner's token is larger. Releasing a lease that is no longer ours
// (expired or taken over) returns ErrLeaseLost and changes nothing.
//
// Durability: on PostgreSQL a release commits without waiting for its WAL
// to reach disk (synchronous_commit off for that one transaction). A crash
// of the server right after it can lose the release; then the lease is
// held until its TTL runs out, as if the holder had died — never held by
// two. Any later durable commit (the next Acquire) flushes it. Acquire
// and Renew always wait for the flush: losing one could hand a token out
// twice or shorten a lease its holder believes in; so do an election's
// Resign and a semaphore permit's Release, whose end observers see.
func (c *Leases) Release(ctx context.Context, l Lease) (retErr error) {
	ctx, end := tracing.Start(ctx, c.drv, "lease.release", c.d, attribute.String("sqlcoord.name", l.Name))
	defer func() { end(retErr) }()
	var ok bool
	err := c.whileRevoking(ctx, func(ctx context.Context) (err error) {
		ok, err = c.d.LeaseRelease(ctx, c.pool(), dialects.LeaseSlot{Name: l.Name, Owner: l.Owner, Token: l.Token})
		return err
	})
	if err != nil {
		return c.wrap("release lease", l.Name, err)
	}
	if !ok {
		return errs.Errorf("coord: release lease %q: %w", truncate(l.Name), ErrLeaseLost)
	}
	return nil
}

// releaseWaking releases l and wakes channel's listeners with it
// (dialects.Dialect.LeaseReleaseWaking): an election's observers, a
// semaphore's queue. false: l was no longer held.
func (c *Leases) releaseWaking(ctx context.Context, l Lease, channel, queue string, observed bool) (bool, error) {
	var ok bool
	err := c.whileRevoking(ctx, func(ctx context.Context) (err error) {
		ok, err = c.d.LeaseReleaseWaking(ctx, c.pool(), dialects.LeaseSlot{Name: l.Name, Owner: l.Owner, Token: l.Token, Queue: queue, Observed: observed}, channel)
		return err
	})
	return ok, err
}

// leaseOwner checks a lease's TTL and returns its owner: owner, or a
// fresh NewOwnerID() for "".
func leaseOwner(what string, ttl time.Duration, owner string) (string, error) {
	if err := validDuration(what, ttl, MinTTL); err != nil {
		return "", err
	}
	if owner == "" {
		return NewOwnerID(), nil
	}
	if err := validName("owner", owner); err != nil {
		return "", err
	}
	return owner, nil
}

// LeaseInfo reads a lease's row; sql.ErrNoRows (wrapped) when it never
// existed.
func (c *Leases) LeaseInfo(ctx context.Context, name string) (LeaseState, error) {
	var s LeaseState
	if err := validName("lease", name); err != nil {
		return s, err
	}
	err := c.pool().QueryRow(ctx, c.q.LeaseGet, name).Scan(&s.Owner, &s.Token, &s.ExpiresAt, &s.Now)
	if err != nil {
		return s, c.wrap("read lease", name, err)
	}
	s.Live = s.ExpiresAt.After(s.Now)
	return s, nil
}
