package saga_test

import (
	"context"

	"github.com/sqlcoord/sqlcoord"
)

func runDriver(ctx context.Context, db *sqlcoord.DB) error { return nil }
