package pgstream_test

import (
	"testing"

	"github.com/sqlcoord/sqlcoord/internal/dbtest"
)

func TestMain(m *testing.M) {
	dbtest.MainWithHelpers(m, map[string]dbtest.HelperFunc{"stream-relay": runStreamRelay})
}
