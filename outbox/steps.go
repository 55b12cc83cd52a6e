package outbox

import (
	"context"
	"time"

	"github.com/sqlcoord/sqlcoord/dialects"
	"github.com/sqlcoord/sqlcoord/outbox/internal/relayutil"
)

// streamSteps are the polling relay's steps that the streaming relay
// (package outbox/pgstream) takes too, so that both publish, retry and
// dead-letter one way: relayutil.Steps, obtained through
// relayutil.StepsOf.
type streamSteps struct{ r *Relay }

func init() {
	relayutil.StepsOf = func(relay any) any { return streamSteps{relay.(*Relay)} }
}

// Publish hands m to the relay's publisher in m's trace, linked to the
// batch span in bctx.
func (s streamSteps) Publish(ctx, bctx context.Context, m Message) error {
	return s.r.publish(ctx, bctx, m)
}

// IsLast: the failed publish perr of m ends it (permanent, or its last
// attempt).
func (s streamSteps) IsLast(m Message, perr error) bool { return s.r.isLast(m, perr) }

// DeadLetter records in tx that m will not be published.
func (s streamSteps) DeadLetter(ctx context.Context, tx dialects.Executor, m Message, perr error) error {
	return s.r.deadLetter(ctx, tx, m, perr)
}

// RetryDelay is the wait after failed attempt n.
func (s streamSteps) RetryDelay(n int) time.Duration { return s.r.retryDelay(n) }

// BatchSize is the relay's batch size.
func (s streamSteps) BatchSize() int { return s.r.opt.BatchSize }

// GuardFrozen bounds how long tx outlives a frozen relay (see the polling
// relay's FrozenTimeout): call beat before publishing and its stop after.
// inClaim: the claim sets the timeout (dialects.WithIdleTimeout), so no
// statement is sent here.
func (s streamSteps) GuardFrozen(ctx context.Context, tx dialects.OwnedTx, timeout time.Duration, inClaim bool) (beat func() (stop func()), err error) {
	return guardFrozen(ctx, s.r.db.Dialect(), tx, timeout, inClaim)
}
