package outbox_test

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord/internal/dbtest"
	"github.com/sqlcoord/sqlcoord/outbox"
)

func TestMain(m *testing.M) {
	if h := dbtest.Helper(); h == "relay" {
		os.Exit(runRelay())
	}
	dbtest.Main(m)
}

// runRelay is a relay process publishing to the test's HTTP consumer.
func runRelay() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	db, err := dbtest.HelperDB(ctx, 4)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	defer db.Close()
	r, err := outbox.NewRelay(db, outbox.HTTPPublisher{URL: os.Getenv("URL"), Client: nil},
		outbox.RelayOptions{BatchSize: 20, PollMin: 10 * time.Millisecond, PollMax: 100 * time.Millisecond, BaseBackoff: 10 * time.Millisecond,
			Listen: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, "relay:", err)
		return 1
	}
	fmt.Println("RELAY UP")
	r.Run(ctx)
	return 0
}
