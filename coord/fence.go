package coord

import (
	"context"
	"fmt"
	"sort"

	"github.com/sqlcoord/sqlcoord/dialects"
	"github.com/sqlcoord/sqlcoord/internal/errs"
	"github.com/sqlcoord/sqlcoord/internal/tracing"
	"go.opentelemetry.io/otel/attribute"
)

// StaleTokenError reports a fenced write that the database refused.
type StaleTokenError struct {
	Resource string // resource name, or table/key for FencedUpdate
	Token    int64  // the token the write carried
}

func (e *StaleTokenError) Error() string {
	return fmt.Sprintf("coord: write to %q with token %d refused: a newer token has written, or the token was issued before the current failover epoch began (a promotion, restart or restore since)", e.Resource, e.Token)
}

// Is makes errors.Is(err, ErrStaleToken) true.
func (e *StaleTokenError) Is(target error) bool { return target == ErrStaleToken }

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
	ok, err := c.d.FenceAdvance(ctx, c.drv.TxExecutor(tx), resource, token, c.drv.Epochs().Seen())
	if err != nil {
		return c.wrap("fence", resource, err)
	}
	if !ok {
		return &StaleTokenError{Resource: resource, Token: token}
	}
	return nil
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
	ok, err := c.d.FencedUpdateRow(ctx, c.drv.TxExecutor(tx), dialects.FencedRow{
		Table: u.Table, KeyColumn: u.KeyColumn, FenceColumn: u.FenceColumn,
		Columns: cols, Values: vals, Token: u.Token, Key: u.Key, HWM: c.drv.Epochs().Seen(),
	})
	if err != nil {
		return c.wrap("fenced update", u.Table, err)
	}
	if !ok {
		return &StaleTokenError{Resource: fmt.Sprintf("%s[%v]", u.Table, u.Key), Token: u.Token}
	}
	return nil
}
