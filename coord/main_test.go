package coord_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/sqlcoord/sqlcoord/internal/dbtest"
)

func TestMain(m *testing.M) {
	if h := dbtest.Helper(); h != "" {
		os.Exit(runHelper(h))
	}
	dbtest.Main(m)
}

// runHelper is the body of a helper process (see dbtest.Spawn).
func runHelper(name string) int {
	ctx := context.Background()
	db, err := dbtest.HelperDB(ctx, 32)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	defer db.Close()
	switch name {
	case "lock-holder":
		err = helperLockHolder(ctx, db)
	case "lease-worker":
		err = helperLeaseWorker(ctx, db)
	default:
		err = fmt.Errorf("unknown helper %q", name)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 1
	}
	return 0
}
