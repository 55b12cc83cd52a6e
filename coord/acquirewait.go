package coord

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/internal/backoff"
	"github.com/sqlcoord/sqlcoord/internal/tracing"
)

// AcquireWait is Acquire that waits, until ctx ends, for the lease to be
// released or to expire, first come first served. The wait is a ticket in
// the lease's queue, a committed row: nothing is held open on the server
// while waiting — no transaction, no snapshot, no lock — so VACUUM and
// InnoDB's purge go on, and a waiting call holds no pool connection. When
// the lease is free only the waiter that queued first (and is still alive:
// its Client renews its waiter row) may take it; the database checks that
// in the statement that grants it, so a holder that releases and acquires
// again at once goes behind the waiters. The waiter at the head is woken
// by the release itself (PostgreSQL: a NOTIFY on its Client's channel;
// MySQL/MariaDB: KILL QUERY of its Client's sleeping connection) or at
// the holder's expiry, by the database's clock. A waiter that dies or
// freezes is skipped once its Client's waiter row expires (the shortest
// TTL it waits with, 1.5 s at least). When ctx ends first the error is
// the last *LeaseHeldError (matching ErrLeaseHeld) joined with ctx's
// error.
//
// A Client waiting in any number of queues costs the server one listening
// (PostgreSQL) or sleeping (MySQL/MariaDB) connection besides the pool,
// one renewal of its waiter row per third of that TTL and one read of its
// queues when woken or when a lease may have expired — not per wait.
func (c *Leases) AcquireWait(ctx context.Context, name, owner string, ttl time.Duration) (_ Lease, retErr error) {
	ctx, end := tracing.Start(ctx, c.drv, "lease.acquire_wait", c.d, attribute.String("sqlcoord.name", name))
	defer func() { end(retErr) }()
	if owner == "" {
		owner = NewOwnerID()
	}
	l, err := c.acquireRetrying(ctx, name, owner, ttl, "", nil)
	var held *LeaseHeldError
	if err == nil || !errors.As(err, &held) {
		return l, err
	}
	w := &wait{kind: waitLease, queue: name, key: name, owner: owner, ttl: ttl, kick: make(chan struct{}, 1)}
	if err := c.w.join(ctx, w); err != nil {
		if ctx.Err() != nil {
			return Lease{}, errors.Join(held, context.Cause(ctx))
		}
		return Lease{}, c.wrap("acquire lease (queue)", name, err)
	}
	for {
		l, err := c.acquireRetrying(ctx, name, owner, ttl, "", w)
		if err == nil {
			c.w.done(ctx, w, false)
			return l, nil
		}
		c.w.missed(w)
		var last *LeaseHeldError
		if errors.As(err, &last) {
			held = last
		} else if ctx.Err() == nil {
			c.w.done(ctx, w, true)
			return Lease{}, err
		}
		if ctx.Err() == nil {
			select {
			case <-w.kick:
				continue
			case <-ctx.Done():
			}
		}
		c.w.done(ctx, w, true) // the next waiter may be at the head now
		return Lease{}, errors.Join(held, context.Cause(ctx))
	}
}

// acquireRetrying is Acquire (queue: "" for the lease's own; each attempt
// traced as lease.acquire) run again after a deadlock or serialization
// failure (InnoDB's concurrent first inserts of a lease row deadlock).
func (c *Leases) acquireRetrying(ctx context.Context, name, owner string, ttl time.Duration, queue string, w *wait) (Lease, error) {
	for attempt := 1; ; attempt++ {
		actx, end := tracing.Start(ctx, c.drv, "lease.acquire", c.d, attribute.String("sqlcoord.name", name))
		l, err := c.acquire(actx, name, owner, ttl, queue, w)
		end(err)
		if err == nil || !sqlcoord.Retryable(err) || attempt == 10 {
			return l, err
		}
		if err := backoff.Sleep(ctx, backoff.Policy{Base: time.Millisecond, Max: 50 * time.Millisecond, Jitter: backoff.Full}.Delay(attempt)); err != nil {
			return l, errors.Join(err, ctx.Err())
		}
	}
}

// notifyChannel names a notification channel after a name, as the
// dialect's statements do: prefix + the first 16 hex digits of its MD5.
// Releases before migration 25 woke their waiters and observers on these.
func notifyChannel(prefix, name string) string {
	sum := md5.Sum([]byte(name))
	return prefix + hex.EncodeToString(sum[:])[:16]
}
