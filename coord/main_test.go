package coord_test

import (
	"testing"

	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

func TestMain(m *testing.M) {
	dbtest.MainWithHelpers(m, map[string]dbtest.HelperFunc{
		"lock-holder":      helperLockHolder,
		"rmw-worker":       helperRMWWorker,
		"lease-worker":     helperLeaseWorker,
		"lease-renewer":    helperRenewer,
		"keeper":           helperKeeper,
		"lease-waiter":     helperLeaseWaiter,
		"candidate":        helperCandidate,
		"permit-holder":    helperPermitHolder,
		"cycling-worker":   helperCyclingWorker,
		"revocable-holder": helperRevocableHolder,
		"fenced-leader":    helperFencedLeader,
		"queued-waiter":    helperQueuedWaiter,
	})
}
