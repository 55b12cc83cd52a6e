// Package keepalive is the one renewal loop behind every lease-like thing
// in sqlcoord: coord.Keeper (leases), ids.Worker (snowflake worker ids) and
// the job scheduler's run heartbeats.
//
// Its validity rule: a renewal whose request was sent at time s grants
// validity until s + TTL - Margin, by this process's monotonic clock. The
// database computes expiry from when it executed the statement, which is
// after s, so the local bound always ends first (Margin absorbs clock-rate
// differences). The first validity comes from the request that created the
// lease (the caller passes its send time to Start), never from when the
// loop happened to start.
//
// When validity runs out without a successful renewal, or a renewal
// reports the lease lost, the loop's context is cancelled with a cause.
// Valid reads the clock directly, so a process resumed from SIGSTOP sees
// the truth before any timer of the loop has had a chance to run.
package keepalive

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sqlcoord/sqlcoord/internal/errs"
)

// ErrExpired is the cause when validity ran out before a renewal
// succeeded (database unreachable, renewals too slow, process frozen).
var ErrExpired = errors.New("keepalive: validity ran out before a renewal succeeded")

// Options describe one keep-alive.
type Options struct {
	// TTL each successful renewal grants, counted from when its request
	// was sent. Required.
	TTL time.Duration
	// Interval between renewals; default TTL/3.
	Interval time.Duration
	// Margin subtracted from every validity; default TTL/10.
	Margin time.Duration
	// Renew performs one renewal. Its context's deadline is the current
	// validity: a renewal cannot succeed after the lease may have lapsed.
	Renew func(ctx context.Context) error
	// Lost reports renewal errors that mean the lease is gone for good
	// (taken over, released); the loop stops at once with that error as
	// cause. Other errors are retried until validity runs out.
	Lost func(error) bool
	// Expired wraps the cause used when validity runs out; default
	// returns ErrExpired with the last renewal error.
	Expired func(last error) error
	// OnError sees every failed renewal.
	OnError func(error)
}

// Loop renews until stopped, lost or expired.
type Loop struct {
	o      Options
	ctx    context.Context
	cancel context.CancelCauseFunc
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once

	mu    sync.Mutex
	until time.Time // carries a monotonic reading
}

// Check validates o and fills defaults.
func Check(o *Options) error {
	if o.TTL <= 0 || o.Renew == nil {
		return fmt.Errorf("keepalive: TTL %v must be positive and Renew set", o.TTL)
	}
	if o.Interval <= 0 {
		o.Interval = o.TTL / 3
	}
	if o.Margin <= 0 {
		o.Margin = o.TTL / 10
	}
	if o.Interval >= o.TTL-o.Margin {
		return fmt.Errorf("keepalive: interval %v leaves no time to renew within TTL %v - margin %v", o.Interval, o.TTL, o.Margin)
	}
	if o.Lost == nil {
		o.Lost = func(error) bool { return false }
	}
	if o.Expired == nil {
		o.Expired = func(last error) error {
			if last == nil {
				return ErrExpired
			}
			return errs.Errorf("%w (last renewal error: %v)", ErrExpired, last)
		}
	}
	return nil
}

// Start begins renewing a lease granted by a request sent at sentAt (take
// time.Now() before sending it). The loop ends with parent.
func Start(parent context.Context, sentAt time.Time, o Options) (*Loop, error) {
	if err := Check(&o); err != nil {
		return nil, err
	}
	l := &Loop{o: o, stop: make(chan struct{}), done: make(chan struct{}), until: sentAt.Add(o.TTL - o.Margin)}
	l.ctx, l.cancel = context.WithCancelCause(parent)
	go l.run()
	return l, nil
}

// Context ends when the lease is lost, expires, the loop is stopped, or
// the parent ends; context.Cause tells which.
func (l *Loop) Context() context.Context { return l.ctx }

// ValidUntil is the current local validity bound.
func (l *Loop) ValidUntil() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.until
}

// Valid reports whether the lease is certainly still held: the loop has
// not ended and the clock is before the validity bound.
func (l *Loop) Valid() bool {
	return l.ctx.Err() == nil && time.Now().Before(l.ValidUntil())
}

// Stop ends renewal (without releasing anything) and cancels Context with
// context.Canceled; it waits for the loop to finish.
func (l *Loop) Stop() {
	l.once.Do(func() { close(l.stop) })
	<-l.done
}

// Done is closed when the loop has ended for any reason.
func (l *Loop) Done() <-chan struct{} { return l.done }

func (l *Loop) run() {
	defer close(l.done)
	renew := time.NewTimer(l.o.Interval)
	defer renew.Stop()
	expire := time.NewTimer(time.Until(l.ValidUntil()))
	defer expire.Stop()
	var last error
	for {
		select {
		case <-l.stop:
			l.cancel(context.Canceled)
			return
		case <-l.ctx.Done():
			return
		case <-expire.C:
			if !time.Now().Before(l.ValidUntil()) {
				l.cancel(l.o.Expired(last))
				return
			}
			expire.Reset(time.Until(l.ValidUntil()))
			continue
		case <-renew.C:
		}
		until := l.ValidUntil()
		if !time.Now().Before(until) {
			l.cancel(l.o.Expired(last))
			return
		}
		sent := time.Now()
		rctx, cancel := context.WithDeadline(l.ctx, until)
		err := l.o.Renew(rctx)
		cancel()
		switch {
		case err == nil:
			l.mu.Lock()
			l.until = sent.Add(l.o.TTL - l.o.Margin)
			l.mu.Unlock()
			if !expire.Stop() {
				select {
				case <-expire.C:
				default:
				}
			}
			expire.Reset(time.Until(l.ValidUntil()))
			renew.Reset(l.o.Interval)
		case l.o.Lost(err):
			l.cancel(err)
			return
		default:
			last = err
			if l.o.OnError != nil {
				l.o.OnError(err)
			}
			retry := min(l.o.Interval/4, max(time.Until(l.ValidUntil()), 0))
			renew.Reset(retry)
		}
	}
}
