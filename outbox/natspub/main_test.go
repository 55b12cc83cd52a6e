package natspub_test

import (
	"testing"

	"github.com/sqlcoord/sqlcoord/internal/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }
