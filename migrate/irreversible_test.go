package migrate_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/migrate"
	"github.com/sqlcoord/sqlcoord/partitions"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

// TestPartitionedKeysKeepTheirMigration: with the idempotency keys
// partitioned by period, moving the schema below the migration that holds
// the period is refused before anything runs: the schema stays at its
// version, not dirty.
func TestPartitionedKeysKeepTheirMigration(t *testing.T) {
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		if env.DB.Dialect().KeyPartitioner() == nil {
			t.Skip("no key partitioner")
		}
		if err := partitions.EnableKeys(ctx, env.DB, partitions.KeysOptions{Period: time.Hour}); err != nil {
			t.Fatal(err)
		}
		before, err := sqlcoord.MigrationStatus(ctx, env.DB)
		if err != nil {
			t.Fatal(err)
		}
		for _, target := range []migrate.Target{migrate.To(28), migrate.To(5), migrate.Down} {
			if err := migrate.Migrate(ctx, env.DB, target); !errors.Is(err, migrate.ErrIrreversible) {
				t.Fatalf("%+v: %v", target, err)
			}
		}
		after, err := sqlcoord.MigrationStatus(ctx, env.DB)
		if err != nil || after.Version != before.Version || after.Dirty {
			t.Fatalf("schema after the refusals: %+v (before %+v), %v", after, before, err)
		}
		if _, err := partitions.KeysStatus(ctx, env.DB); err != nil {
			t.Fatalf("keys after the refusals: %v", err)
		}
		if err := migrate.Migrate(ctx, env.DB, migrate.Up); err != nil {
			t.Fatalf("up: %v", err)
		}
	})
}
