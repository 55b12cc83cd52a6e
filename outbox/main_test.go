package outbox_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/outbox"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

func TestMain(m *testing.M) {
	dbtest.MainWithHelpers(m, map[string]dbtest.HelperFunc{"relay": runRelay, "frozen-relay": runFrozenRelay})
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

// runFrozenRelay claims a batch and hangs in its first publish (the test
// then freezes the process with SIGSTOP).
func runFrozenRelay(ctx context.Context, db *sqlcoord.DB) error {
	frozen, _ := time.ParseDuration(os.Getenv("FROZEN_TIMEOUT"))
	r, err := outbox.NewRelay(db, outbox.PublisherFunc(func(ctx context.Context, m outbox.Message) error {
		fmt.Println("PUBLISHING")
		<-ctx.Done()
		return ctx.Err()
	}), outbox.RelayOptions{BatchSize: 100, PublishTimeout: time.Hour, FrozenTimeout: frozen, Listen: outbox.ListenOff})
	if err != nil {
		return err
	}
	_, err = r.Once(ctx)
	return err
}
