package coord

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sqlcoord/sqlcoord/internal/errs"
	"github.com/sqlcoord/sqlcoord/internal/keepalive"
	"github.com/sqlcoord/sqlcoord/internal/tracing"
	"github.com/sqlcoord/sqlcoord/metrics"
	"go.opentelemetry.io/otel/attribute"
)

// KeepAliveOptions tune KeepAlive.
type KeepAliveOptions struct {
	// Interval between renewals; default TTL/3.
	Interval time.Duration
	// Margin before the lease's expiry at which the keeper gives up when
	// renewals keep failing (network down, database unreachable); default
	// TTL/10. The work's context is cancelled then, before the database
	// could hand the lease to someone else.
	Margin time.Duration
	// OnError, if set, sees every failed renewal attempt.
	OnError func(error)
	// MaxHold, when above 0, bounds how long the keeper holds the lease:
	// after it the keeper stops renewing, cancels Context with cause
	// ErrMaxHold and releases the lease, so a holder stuck in its work
	// (but alive and renewing) cannot keep it from the others forever.
	MaxHold time.Duration
}

// ErrMaxHold is the cause of a Keeper's Context ending after
// KeepAliveOptions.MaxHold.
var ErrMaxHold = errors.New("coord: lease held for its MaxHold")

// Keeper renews a lease in the background. Its Context is cancelled — with
// a cause matching ErrLeaseLost (see context.Cause) — the moment the lease
// is known lost, or when renewal has failed for so long that the lease may
// have expired. Do the lease's work under that context, and fence its
// writes: cancellation is prompt but advisory, the fence is the guarantee.
//
// Validity is counted from when the request that granted it was sent
// (Acquire's or the last successful Renew's), never from when the keeper
// started or a reply arrived: Context cannot outlive the lease by a round
// trip. Valid reads the clock itself, so a process resumed after a freeze
// sees an expired lease as expired before any timer runs.
//
// Shutdown: when the context given to KeepAlive ends (SIGTERM through
// signal.NotifyContext, say), the keeper releases the lease before Done
// is closed, so a restarted instance acquires it at once instead of
// waiting a TTL; wait for Done before the process exits. Stop stops
// renewing without releasing (the lease then expires after its TTL);
// Release stops and releases.
type Keeper struct {
	renew   func(context.Context, Lease) (Lease, error)
	release func(context.Context, Lease) error
	loop    *keepalive.Loop
	stopped atomic.Bool
	done    chan struct{}

	mu    sync.Mutex
	lease Lease
}

// releaseTimeout bounds the release a keeper makes when its context ends.
const releaseTimeout = 5 * time.Second

// KeepAlive starts renewing l until Stop, ctx's end, or loss of the lease.
// l should come from Acquire or Renew; a Lease built by hand is renewed
// once, synchronously, to learn when its validity starts.
func (c *Leases) KeepAlive(ctx context.Context, l Lease, opt KeepAliveOptions) (*Keeper, error) {
	return c.keepAlive(ctx, l, opt, c.Release)
}

// keepAlive is KeepAlive releasing through release (an election's and a
// semaphore's wake their own waiters).
func (c *Leases) keepAlive(ctx context.Context, l Lease, opt KeepAliveOptions, release func(context.Context, Lease) error) (*Keeper, error) {
	if err := validDuration("lease TTL", l.TTL, MinTTL); err != nil {
		return nil, err
	}
	if opt.Interval < 0 || opt.Margin < 0 || opt.MaxHold < 0 {
		return nil, errs.Errorf("%w: negative keep-alive interval %v, margin %v or max hold %v", ErrInvalidTTL, opt.Interval, opt.Margin, opt.MaxHold)
	}
	k := &Keeper{renew: c.Renew, release: release, done: make(chan struct{})}
	parent := ctx
	rec, dialect := metrics.Of(c.drv), c.d.Name()
	o := keepalive.Options{TTL: l.TTL, Interval: opt.Interval, Margin: opt.Margin,
		OnError: func(err error) {
			rec.LeaseRenewFailed(dialect, false) // transient: retried
			if opt.OnError != nil {
				opt.OnError(err)
			}
		},
		Renew: func(ctx context.Context) error {
			nl, err := k.renew(ctx, k.Lease())
			if err == nil {
				k.mu.Lock()
				k.lease = nl
				k.mu.Unlock()
			}
			return err
		},
		Lost: func(err error) bool {
			lost := errors.Is(err, ErrLeaseLost)
			if lost {
				rec.LeaseRenewFailed(dialect, true)
			}
			return lost
		},
		Expired: func(last error) error {
			rec.LeaseRenewFailed(dialect, true)
			return errs.Errorf("%w: renewal failing until the lease may have expired: %v", ErrLeaseLost, last)
		},
	}
	if err := keepalive.Check(&o); err != nil {
		return nil, errs.Errorf("%w: %v", ErrInvalidTTL, err)
	}
	// One span for the keep-alive's whole life; each renewal is a child
	// of it (not a trace of its own).
	ctx, end := tracing.Start(ctx, c.drv, "lease.keepalive", c.d, attribute.String("sqlcoord.name", l.Name), attribute.Int64("sqlcoord.token", l.Token))
	if l.sentAt.IsZero() {
		var err error
		if l, err = c.Renew(ctx, l); err != nil {
			end(err)
			return nil, err
		}
	}
	k.lease = l
	lctx, stopHold := ctx, context.CancelFunc(func() {})
	if opt.MaxHold > 0 {
		lctx, stopHold = context.WithTimeoutCause(ctx, opt.MaxHold, ErrMaxHold)
	}
	loop, err := keepalive.Start(lctx, l.sentAt, o)
	if err != nil {
		stopHold()
		end(err)
		return nil, errs.Errorf("%w: %v", ErrInvalidTTL, err)
	}
	k.loop = loop
	go func() {
		defer close(k.done)
		defer stopHold()
		<-loop.Done()
		cause := context.Cause(loop.Context())
		switch {
		case errors.Is(cause, ErrLeaseLost):
			end(cause)
		case !k.stopped.Load() && (parent.Err() != nil || errors.Is(cause, ErrMaxHold)):
			// the application is shutting down, or MaxHold ran out: hand
			// the lease back
			rctx, cancel := context.WithTimeout(context.WithoutCancel(parent), releaseTimeout)
			err := k.release(rctx, k.Lease())
			cancel()
			if err != nil && !errors.Is(err, ErrLeaseLost) && opt.OnError != nil {
				opt.OnError(err)
			}
			end(nil)
		default:
			end(nil) // stopped: not a failure
		}
	}()
	return k, nil
}

// Context is cancelled when the lease is lost (cause ErrLeaseLost), when
// the parent context ends, or after Stop.
func (k *Keeper) Context() context.Context { return k.loop.Context() }

// Valid reports whether the lease is certainly still held by this process
// now, by the local clock (see Keeper).
func (k *Keeper) Valid() bool { return k.loop.Valid() }

// Lease returns the lease with its latest expiry.
func (k *Keeper) Lease() Lease {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.lease
}

// Stop ends renewal (it does not release the lease: it expires after its
// TTL) and cancels Context.
func (k *Keeper) Stop() {
	k.stopped.Store(true)
	k.loop.Stop()
}

// Release stops renewal and releases the lease, so that the next Acquire
// by anyone succeeds at once (with a larger token). ErrLeaseLost when it
// was no longer held.
func (k *Keeper) Release(ctx context.Context) error {
	k.Stop()
	<-k.done
	return k.release(ctx, k.Lease())
}

// Done is closed when the keeper has stopped for any reason — after the
// release it makes when its context ended.
func (k *Keeper) Done() <-chan struct{} { return k.done }
