package bench

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/coord/ids"
)

// idBatch is how many ids one measured operation generates, so that the
// clock reads of Measure do not dominate nanosecond-scale generators.
const idBatch = 1000

// IDs measures id generation with 1 and 8 goroutines: snowflake, segment
// (step 1,000 and 10,000), UUIDv7, google/uuid v4 and, as the database
// baseline, a plain UPDATE … SET n = n + 1 per id. Case names carry the
// database round trips per million ids.
func IDs(ctx context.Context, db *sqlcoord.DB, cfg Config) ([]Result, error) {
	cfg.defaults()
	s := &suite{db: db, cfg: cfg, group: "ids (ops/s = ids/s; latency per 1000 ids)"}
	db.ExecContext(ctx, `DROP TABLE IF EXISTS bench_counter`)
	if _, err := db.ExecContext(ctx, `CREATE TABLE bench_counter (id INT PRIMARY KEY, n BIGINT NOT NULL)`); err != nil {
		return nil, err
	}
	defer db.ExecContext(context.Background(), `DROP TABLE bench_counter`)
	db.ExecContext(ctx, `INSERT INTO bench_counter VALUES (1, 0)`)
	w, err := ids.LeaseWorker(ctx, db, ids.WorkerOptions{})
	if err != nil {
		return nil, err
	}
	defer w.Close(context.Background())
	upd := `UPDATE bench_counter SET n = n + 1 WHERE id = 1`
	for _, g := range []int{1, 8} {
		poolSize(db, g+4)
		s.run(ctx, "UUIDv4 (google/uuid)", "", g, func(context.Context, int) error {
			for i := 0; i < idBatch; i++ {
				uuid.New()
			}
			return nil
		})
		s.run(ctx, "UUIDv7", "UUIDv4 (google/uuid)", g, func(context.Context, int) error {
			for i := 0; i < idBatch; i++ {
				if _, err := ids.NewUUIDv7(); err != nil {
					return err
				}
			}
			return nil
		})
		s.run(ctx, "snowflake", "UUIDv4 (google/uuid)", g, func(context.Context, int) error {
			for i := 0; i < idBatch; i++ {
				if _, err := w.Next(); err != nil {
					return err
				}
			}
			return nil
		})
		for _, step := range []int{1000, 10000} {
			tag := fmt.Sprintf("bench-%d-%d", step, g)
			seg, err := ids.NewSegments(db, tag, ids.SegmentOptions{Step: step, MaxStep: step, AutoCreate: true})
			if err != nil {
				return nil, err
			}
			s.run(ctx, fmt.Sprintf("segment step %d (%d round trips/M)", step, 1_000_000/step), "UUIDv4 (google/uuid)", g, func(ctx context.Context, _ int) error {
				for i := 0; i < idBatch; i++ {
					if _, err := seg.Next(ctx); err != nil {
						return err
					}
				}
				return nil
			})
		}
		s.run(ctx, "UPDATE n=n+1 per id (1M round trips/M)", "UUIDv4 (google/uuid)", g, func(ctx context.Context, _ int) error {
			for i := 0; i < idBatch/100; i++ { // 10 per op: a database round trip each
				if _, err := db.ExecContext(ctx, upd); err != nil {
					return err
				}
			}
			return nil
		})
	}
	// report ids per second: 1000 ids per op, 10 for the UPDATE case
	// (whose latency is then per 10 ids; scaled to 1000 below)
	for i := range s.out {
		per := float64(idBatch)
		if s.out[i].Case == "UPDATE n=n+1 per id (1M round trips/M)" {
			per = float64(idBatch / 100)
			s.out[i].P50 *= 100
			s.out[i].P99 *= 100
		}
		s.out[i].OpsPerS *= per
		s.out[i].Ops *= int64(per)
	}
	for i := range s.out { // recompute ratios on the rescaled figures
		for _, b := range s.out {
			if b.Case == s.out[i].Baseline && b.Clients == s.out[i].Clients && b.OpsPerS > 0 {
				s.out[i].Ratio = s.out[i].OpsPerS / b.OpsPerS
			}
		}
	}
	return s.out, nil
}
