package coord

import (
	"context"
	"crypto/md5"
	"database/sql"
	"encoding/hex"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/dialects"
	"github.com/sqlcoord/sqlcoord/internal/backoff"
	"github.com/sqlcoord/sqlcoord/internal/tracing"
)

// AcquireWait is Acquire that waits, until ctx ends, for the lease to be
// released or to expire, without a stampede: waiters queue in the
// database on a lock of their own (PostgreSQL's lock manager, InnoDB's
// lock queue, first come first served), and only the head of the queue
// watches the lease. The head wakes when the holder's lease expires (by
// the database clock) and — on PostgreSQL, where Release sends a NOTIFY —
// as soon as it is released; on MySQL/MariaDB, or behind a
// transaction-mode pooler, it checks every 5 ms (one statement per lease,
// whatever the number of waiters). On PostgreSQL a Client keeps one
// listening connection per lease being waited for, and for a few seconds
// after the last waiter returned. When ctx ends first the error is the
// last *LeaseHeldError (matching ErrLeaseHeld) joined with ctx's error.
//
// Waiting holds a database connection and an open transaction for the
// queue; one waiter per process and lease is the intended use.
func (c *Client[TTx]) AcquireWait(ctx context.Context, name, owner string, ttl time.Duration) (_ Lease, retErr error) {
	ctx, end := tracing.Start(ctx, c.drv, "lease.acquire_wait", c.d, attribute.String("sqlcoord.name", name))
	defer func() { end(retErr) }()
	if owner == "" {
		owner = NewOwnerID()
	}
	l, err := c.acquireRetrying(ctx, name, owner, ttl)
	var held *LeaseHeldError
	if err == nil || !errors.As(err, &held) {
		return l, err
	}
	// Queue: one transaction per waiter, holding the queue lock while it
	// is the head; the lock's own wait is the queue.
	queue := dialects.LeaseQueue(name)
	for {
		if ctx.Err() != nil {
			return Lease{}, errors.Join(held, context.Cause(ctx))
		}
		l, err, retry := c.waitAsHead(ctx, queue, name, owner, ttl)
		if !retry {
			if err != nil && ctx.Err() != nil {
				// ctx ended while waiting (perhaps inside a statement):
				// say who held it when last seen
				var last *LeaseHeldError
				if errors.As(err, &last) && last.Holder != "" {
					held = last
				}
				return Lease{}, errors.Join(held, context.Cause(ctx))
			}
			return l, err
		}
	}
}

// waitAsHead queues for the lease's waiter lock and, once at the head,
// watches the lease until it gets it. retry: the queue wait ran out (try
// again).
func (c *Client[TTx]) waitAsHead(ctx context.Context, queue, name, owner string, ttl time.Duration) (Lease, error, bool) {
	leave, retry, err := c.enterQueue(ctx, queue, "acquire lease (queue)", name)
	if retry {
		return Lease{}, nil, true
	}
	if err != nil {
		if ctx.Err() != nil {
			return Lease{}, &LeaseHeldError{Name: name}, false
		}
		return Lease{}, err, false
	}
	defer leave()
	wake := make(chan struct{}, 1)
	listening, unsubscribe := c.listen(leaseChannel(name), wake)
	defer unsubscribe()
	var held *LeaseHeldError
	for {
		l, err := c.acquireRetrying(ctx, name, owner, ttl)
		if err == nil {
			return l, nil, false
		}
		if !errors.As(err, &held) {
			if ctx.Err() != nil && held != nil {
				return Lease{}, held, false
			}
			return l, err, false
		}
		st, err := c.LeaseInfo(ctx, name)
		if err != nil {
			if ctx.Err() != nil {
				return Lease{}, held, false
			}
			return Lease{}, err, false
		}
		d := st.ExpiresAt.Sub(st.Now) + time.Millisecond
		if !listening() {
			d = min(d, headPoll)
		}
		t := time.NewTimer(max(d, 0))
		select {
		case <-ctx.Done():
			t.Stop()
			return Lease{}, held, false
		case <-wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// enterQueue waits in a queue of the database's own (a lock taken in a
// transaction: PostgreSQL's lock manager, InnoDB's lock queue, first come
// first served) until this caller is its head; leave ends the transaction
// and hands the head on. retry: the wait ended in a deadlock or timeout
// while ctx lives (queue again). When ctx ends first, err is ctx's.
func (c *Client[TTx]) enterQueue(ctx context.Context, queue, op, name string) (leave func(), retry bool, err error) {
	c.ensureQueue(ctx, queue)
	tx, err := c.drv.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return nil, false, c.wrap(op, name, err)
	}
	leave = func() { c.drv.RollbackTx(context.WithoutCancel(ctx), tx) }
	wait := time.Hour
	if dl, ok := ctx.Deadline(); ok {
		wait = max(time.Until(dl), time.Millisecond)
	}
	if err := c.Lock(ctx, tx, queue, wait); err != nil && !errors.Is(err, sqlcoord.ErrGaleraLocks) {
		// (on a multi-writer Galera cluster there is no queue: every
		// waiter watches)
		leave()
		if (errors.Is(err, sqlcoord.ErrLockTimeout) || errors.Is(err, sqlcoord.ErrDeadlock)) && ctx.Err() == nil {
			// a deadlock: InnoDB's waiters on a lock row being created
			// for the first time; queue again
			return nil, true, nil
		}
		if ctx.Err() != nil {
			return nil, false, context.Cause(ctx)
		}
		return nil, false, err
	}
	return leave, false, nil
}

// ensureQueue makes sure a queue's lock row is committed (MySQL/MariaDB,
// whose locks are rows): waiters that queue on a row being inserted by an
// open transaction wait for that insert, not in the row's lock queue, and
// when it rolls back they race for the row in no order. A try in a
// transaction of its own commits the row once; where the lock is held
// the row exists. Best effort: a failure here shows in the queue's wait.
func (c *Client[TTx]) ensureQueue(ctx context.Context, queue string) {
	if _, done := c.queues.Load(queue); done {
		return
	}
	// a row already there (the usual case: a head holds it) is seen
	// without a lock; MariaDB's NOWAIT would wait a second for its holder
	var one int
	if err := c.pool().QueryRow(ctx, `SELECT 1 FROM coord_locks WHERE name = `+c.d.Placeholder(1), queue).Scan(&one); err == nil {
		c.queues.Store(queue, true)
		return
	}
	tx, err := c.drv.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return
	}
	err = c.TryLock(ctx, tx, queue)
	if err == nil {
		err = c.drv.CommitTx(ctx, tx)
	} else {
		c.drv.RollbackTx(context.WithoutCancel(ctx), tx)
	}
	if err == nil || errors.Is(err, sqlcoord.ErrLocked) {
		c.queues.Store(queue, true)
	}
}

// acquireRetrying is Acquire run again after a deadlock or serialization
// failure (InnoDB's concurrent first inserts of a lease row deadlock).
func (c *Client[TTx]) acquireRetrying(ctx context.Context, name, owner string, ttl time.Duration) (Lease, error) {
	for attempt := 1; ; attempt++ {
		l, err := c.Acquire(ctx, name, owner, ttl)
		if err == nil || !sqlcoord.Retryable(err) || attempt == 10 {
			return l, err
		}
		if err := backoff.Sleep(ctx, backoff.Policy{Base: time.Millisecond, Max: 50 * time.Millisecond, Jitter: backoff.Full}.Delay(attempt)); err != nil {
			return l, errors.Join(err, ctx.Err())
		}
	}
}

// headPoll is how often the head of a queue checks the lease when no
// notification can wake it (MySQL/MariaDB, a pooler, a listener still
// connecting): one statement per interval per waited-for lease.
const headPoll = 5 * time.Millisecond

// listenLinger keeps a lease's listening connection open after its last
// waiter returned, for the next one (a holder that hands over and waits
// again, a queue's next head in this process).
const listenLinger = 5 * time.Second

// leaseListeners share one listening connection per lease name among a
// Client's waiters.
type leaseListeners struct {
	mu sync.Mutex
	m  map[string]*leaseListener
}

type leaseListener struct {
	refs      int
	listening atomic.Bool
	subs      map[chan struct{}]struct{}
	stop      context.CancelFunc
	linger    *time.Timer
}

// leaseChannel is the channel LeaseRelease notifies for a lease.
func leaseChannel(name string) string { return notifyChannel("coord_lease_", name) }

// notifyChannel names a notification channel after a name, as the
// dialect's statements do: prefix + the first 16 hex digits of its MD5.
func notifyChannel(prefix, name string) string {
	sum := md5.Sum([]byte(name))
	return prefix + hex.EncodeToString(sum[:])[:16]
}

// listen subscribes wake to a notification channel (PostgreSQL: a lease's
// releases, an election's terms, a semaphore's releases) and returns
// whether notifications are in effect yet, and the unsubscribe. Waiters
// on one channel share one listening connection.
func (c *Client[TTx]) listen(channel string, wake chan struct{}) (func() bool, func()) {
	name := channel
	never := func() bool { return false }
	l, ok := any(c.drv).(sqlcoord.Listener)
	if !ok || l.CanListen() != nil {
		return never, func() {}
	}
	ls := c.ll
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ll := ls.m[name]
	if ll == nil {
		ll = &leaseListener{subs: map[chan struct{}]struct{}{}}
		ls.m[name] = ll
		ctx, stop := context.WithCancel(context.Background())
		ll.stop = stop
		go func() {
			for ctx.Err() == nil {
				opt := sqlcoord.ListenOptions{Probe: true, ProbeTimeout: 2 * time.Second, Ready: func() { ll.listening.Store(true) }}
				l.Listen(ctx, channel, opt, func() {
					ls.mu.Lock()
					for ch := range ll.subs {
						select {
						case ch <- struct{}{}:
						default:
						}
					}
					ls.mu.Unlock()
				})
				ll.listening.Store(false) // failed or ended: the waiters poll
				if ctx.Err() == nil {
					t := time.NewTimer(time.Second) // reconnect
					select {
					case <-ctx.Done():
					case <-t.C:
					}
					t.Stop()
				}
			}
		}()
	}
	if ll.linger != nil {
		ll.linger.Stop()
		ll.linger = nil
	}
	ll.refs++
	ll.subs[wake] = struct{}{}
	return ll.listening.Load, func() {
		ls.mu.Lock()
		defer ls.mu.Unlock()
		delete(ll.subs, wake)
		if ll.refs--; ll.refs == 0 {
			ll.linger = time.AfterFunc(listenLinger, func() {
				ls.mu.Lock()
				defer ls.mu.Unlock()
				if ll.refs == 0 && ls.m[name] == ll {
					ll.stop()
					delete(ls.m, name)
				}
			})
		}
	}
}
