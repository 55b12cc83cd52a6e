package coord_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord/coord"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

// The keeper's context cannot outlive the lease by the Acquire
// round trip. Replies are delayed 250ms (a slow network): the database
// starts the TTL when it runs the statement, so the lease expires about
// TTL after Acquire was sent. Renewals then fail (network down); the
// context must end before sent + TTL, not TTL after KeepAlive started.
func TestKeeperValidityCountsFromAcquireSend(t *testing.T) {
	t.Parallel()
	const ttl = time.Second
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		proxy, via := dbtest.OpenVia(t, env)
		c := coord.New(via)
		// MySQL's Acquire makes about four round trips (prepare, execute,
		// close, read), PostgreSQL's one or two: keep Acquire well under TTL
		delay := 250 * time.Millisecond
		if env.Family == "mysql" {
			delay = 120 * time.Millisecond
		}
		proxy.SetReplyDelay(delay)
		sent := time.Now()
		l, err := c.Acquire(ctx, "slow-acquire", "", ttl)
		if err != nil {
			t.Fatal(err)
		}
		took := time.Since(sent)
		proxy.SetDown(true)
		proxy.SetReplyDelay(0)
		k, err := c.KeepAlive(ctx, l, coord.KeepAliveOptions{})
		if err != nil {
			t.Fatal(err)
		}
		<-k.Context().Done()
		ended := time.Since(sent)
		t.Logf("Acquire took %v; keeper context ended %v after the request was sent (TTL %v)", took.Round(time.Millisecond), ended.Round(time.Millisecond), ttl)
		if ended >= ttl {
			t.Errorf("the keeper's context outlived the lease: ended %v after Acquire was sent, TTL %v", ended, ttl)
		}
		if !errors.Is(context.Cause(k.Context()), coord.ErrLeaseLost) || k.Valid() {
			t.Errorf("cause %v, valid %v", context.Cause(k.Context()), k.Valid())
		}
	})
}
