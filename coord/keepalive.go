package coord

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
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
}

// Keeper renews a lease in the background. Its Context is cancelled — with
// cause ErrLeaseLost (see context.Cause) — the moment the lease is known
// lost, or when renewal has failed for so long that the lease may have
// expired. Do the lease's work under that context, and fence its writes:
// cancellation is prompt but advisory, the fence is the guarantee.
type Keeper struct {
	c      *Client
	opt    KeepAliveOptions
	ctx    context.Context
	cancel context.CancelCauseFunc
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once

	mu    sync.Mutex
	lease Lease
}

// KeepAlive starts renewing l until Stop, ctx's end, or loss of the lease.
func (c *Client) KeepAlive(ctx context.Context, l Lease, opt KeepAliveOptions) (*Keeper, error) {
	if err := validDuration("lease TTL", l.TTL, MinTTL); err != nil {
		return nil, err
	}
	if opt.Interval <= 0 {
		opt.Interval = l.TTL / 3
	}
	if opt.Margin <= 0 {
		opt.Margin = l.TTL / 10
	}
	if opt.Interval >= l.TTL-opt.Margin {
		return nil, fmt.Errorf("%w: keep-alive interval %v leaves no time to renew a %v lease", ErrInvalidTTL, opt.Interval, l.TTL)
	}
	k := &Keeper{c: c, opt: opt, lease: l, stop: make(chan struct{}), done: make(chan struct{})}
	k.ctx, k.cancel = context.WithCancelCause(ctx)
	go k.run(time.Now())
	return k, nil
}

// Context is cancelled when the lease is lost (cause ErrLeaseLost), when
// the parent context ends, or after Stop.
func (k *Keeper) Context() context.Context { return k.ctx }

// Lease returns the lease with its latest expiry.
func (k *Keeper) Lease() Lease {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.lease
}

// Stop ends renewal (it does not release the lease) and cancels Context.
func (k *Keeper) Stop() {
	k.once.Do(func() { close(k.stop) })
	<-k.done
}

// Done is closed when the keeper has stopped for any reason.
func (k *Keeper) Done() <-chan struct{} { return k.done }

func (k *Keeper) run(acquiredAt time.Time) {
	defer close(k.done)
	// validUntil is a local, monotonic, conservative bound: the lease was
	// granted for TTL measured from no earlier than the moment we sent the
	// request, so it certainly lasts until sentAt + TTL by our clock only if
	// clocks run at the same rate; Margin covers drift.
	validUntil := acquiredAt.Add(k.lease.TTL - k.opt.Margin)
	t := time.NewTimer(k.opt.Interval)
	defer t.Stop()
	for {
		select {
		case <-k.stop:
			k.cancel(context.Canceled)
			return
		case <-k.ctx.Done():
			return
		case <-t.C:
		}
		sent := time.Now()
		rctx, cancel := context.WithDeadline(k.ctx, validUntil)
		l, err := k.c.Renew(rctx, k.Lease())
		cancel()
		switch {
		case err == nil:
			k.mu.Lock()
			k.lease = l
			k.mu.Unlock()
			validUntil = sent.Add(l.TTL - k.opt.Margin)
			t.Reset(k.opt.Interval)
		case errors.Is(err, ErrLeaseLost):
			k.cancel(err)
			return
		default:
			if k.opt.OnError != nil {
				k.opt.OnError(err)
			}
			if !time.Now().Before(validUntil) {
				k.cancel(fmt.Errorf("%w: renewal failing until the lease may have expired: %v", ErrLeaseLost, err))
				return
			}
			retry := k.opt.Interval / 4
			if left := time.Until(validUntil); retry > left {
				retry = left
			}
			t.Reset(retry)
		}
	}
}
