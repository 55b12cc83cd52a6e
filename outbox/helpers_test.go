package outbox_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/outbox"
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
