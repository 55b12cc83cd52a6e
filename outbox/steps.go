package outbox

import (
	"context"
	"time"

	"github.com/sqlcoord/sqlcoord/dialects"
	"github.com/sqlcoord/sqlcoord/internal/core"
)

// StreamSteps are the polling relay's steps that the streaming relay
// (package outbox/pgstream) takes too, so that both publish, retry and
// dead-letter one way. Only sqlcoord's own packages can obtain them:
// Relay.Steps takes a type only this module can name.
type StreamSteps struct{ r *Relay }

// Steps returns r's steps (for package outbox/pgstream).
func (r *Relay) Steps(core.Seal) StreamSteps { return StreamSteps{r} }

// Publish hands m to the relay's publisher in m's trace, linked to the
// batch span in bctx.
func (s StreamSteps) Publish(ctx, bctx context.Context, m Message) error {
	return s.r.publish(ctx, bctx, m)
}

// IsLast: the failed publish perr of m ends it (permanent, or its last
// attempt).
func (s StreamSteps) IsLast(m Message, perr error) bool { return s.r.isLast(m, perr) }

// DeadLetter records in tx that m will not be published.
func (s StreamSteps) DeadLetter(ctx context.Context, tx dialects.Executor, m Message, perr error) error {
	return s.r.deadLetter(ctx, tx, m, perr)
}

// RetryDelay is the wait after failed attempt n.
func (s StreamSteps) RetryDelay(n int) time.Duration { return s.r.retryDelay(n) }

// BatchSize is the relay's batch size.
func (s StreamSteps) BatchSize() int { return s.r.opt.BatchSize }

// GuardFrozen bounds how long tx outlives a frozen relay (see the polling
// relay's FrozenTimeout): call beat before publishing and its stop after.
// inClaim: the claim sets the timeout (dialects.WithIdleTimeout), so no
// statement is sent here.
func (s StreamSteps) GuardFrozen(ctx context.Context, tx dialects.OwnedTx, timeout time.Duration, inClaim bool) (beat func() (stop func()), err error) {
	return guardFrozen(ctx, s.r.db.Dialect(), tx, timeout, inClaim)
}
