// Package backoff is sqlcoord's one retry-delay rule: exponential growth
// from Base, capped at Max, with a chosen jitter. It is stateless — the
// delay before retry n is a function of n — so a retry count stored in a
// row (the outbox's attempts) follows the same schedule as an in-memory
// retry loop. (cenkalti/backoff's policies are stateful iterators, which
// fit neither the relay's per-row schedule nor the fixed bounds here.)
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Jitter spreads retries of many clients apart.
type Jitter int

const (
	// None: exactly the capped exponential delay.
	None Jitter = iota
	// Full: uniform in [0, d] (best for contention between clients).
	Full
	// Equal: uniform in [d/2, d] (never much shorter than planned).
	Equal
)

// Policy is a retry schedule; the zero Jitter is None.
type Policy struct {
	Base, Max time.Duration
	Jitter    Jitter
}

// Delay before retry n (n = 0 for the first retry): min(Max, Base·2ⁿ),
// jittered. A non-positive Base gives 0.
func (p Policy) Delay(n int) time.Duration {
	if p.Base <= 0 {
		return 0
	}
	d := p.Base << min(max(n, 0), 30)
	if d <= 0 || (p.Max > 0 && d > p.Max) { // d <= 0: shifted out of range
		d = max(p.Max, p.Base)
	}
	switch p.Jitter {
	case Full:
		return time.Duration(rand.Int64N(int64(d) + 1))
	case Equal:
		return d/2 + time.Duration(rand.Int64N(int64(d/2)+1))
	}
	return d
}

// Sleep waits for d, or until ctx ends (then it returns ctx.Err()).
func Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err // a context already ended wins over a short timer
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Retry runs fn until it returns an error that retryable rejects (or
// none), at most tries times, sleeping p's delay between tries; it returns
// fn's last error, or ctx.Err() when ctx ends while it sleeps.
func (p Policy) Retry(ctx context.Context, tries int, retryable func(error) bool, fn func() error) error {
	for i := 0; ; i++ {
		err := fn()
		if err == nil || !retryable(err) || i >= tries-1 {
			return err
		}
		if err := Sleep(ctx, p.Delay(i)); err != nil {
			return err
		}
	}
}
