package outbox_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/outbox"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

func decodeJSON(r *http.Request, v any) error {
	b, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// startRelay runs a relay on db publishing to pub until the test ends.
func startRelay(t *testing.T, db sqlcoord.Base, pub outbox.Publisher, opt outbox.RelayOptions) {
	t.Helper()
	r, err := outbox.NewRelay(db, pub, opt)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	t.Cleanup(func() { stop(); <-done })
}

// countNotifications counts the NOTIFYs on coord_outbox, from a connection
// of its own, until the test ends.
func countNotifications(t *testing.T, env *dbtest.Env) *atomic.Int64 {
	t.Helper()
	var n atomic.Int64
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	go env.Open(t).Listen(ctx, "coord_outbox", sqlcoord.ListenOptions{}, func() { n.Add(1) })
	return &n
}
