package outbox_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/internal/dbtest"
	"github.com/sqlcoord/sqlcoord/outbox"
)

func TestMain(m *testing.M) {
	dbtest.MainWithHelpers(m, map[string]dbtest.HelperFunc{"relay": runRelay})
}

// runRelay is a relay process publishing to the test's HTTP consumer.
func runRelay(ctx context.Context, db *sqlcoord.DB) error {
	r, err := outbox.NewRelay(db, outbox.HTTPPublisher{URL: os.Getenv("URL")},
		outbox.RelayOptions{BatchSize: 20, PollMin: 10 * time.Millisecond, PollMax: 100 * time.Millisecond, BaseBackoff: 10 * time.Millisecond})
	if err != nil {
		return err
	}
	fmt.Println("RELAY UP")
	return r.Run(ctx)
}
