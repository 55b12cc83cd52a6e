package saga_test

import (
	"testing"

	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

func TestMain(m *testing.M) {
	dbtest.MainWithHelpers(m, map[string]dbtest.HelperFunc{"driver": runDriver})
}
