package coord_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/coord"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

// dialects.Dialect.EpochBase gives hand-written SQL the guarantee of
// sqlcoord's own fenced statements: tokens sqlcoord issues are above it, a
// write checked against it refuses a token at or below it, and a client
// that saw a newer epoch is refused.
func TestEpochBaseForHandWrittenSQL(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		db := env.DB
		d := db.Dialect()
		// A new epoch (as after a restore): its base is far above the
		// install's 0, so a constant could not pass for it.
		advanced, err := d.EpochAdvance(ctx, db.Executor())
		if err != nil {
			t.Fatal(err)
		}
		var base int64
		if err := db.QueryRowContext(ctx, `SELECT `+d.EpochBase("0")).Scan(&base); err != nil {
			t.Fatal(err)
		}
		if base != advanced || base == 0 {
			t.Fatalf("EpochBase %d, the epoch advanced to %d", base, advanced)
		}
		if _, err := db.ExecContext(ctx, `CREATE TABLE hand_fenced (k VARCHAR(64) PRIMARY KEY, v BIGINT NOT NULL)`); err != nil {
			t.Fatal(err)
		}
		write := `INSERT INTO hand_fenced (k, v) SELECT ` + d.Placeholder(1) + `, 1 WHERE ` + d.EpochBase("0") + ` < ` + d.Placeholder(2)
		if d.Family() != "postgres" {
			write = `INSERT INTO hand_fenced (k, v) SELECT ?, 1 FROM DUAL WHERE ` + d.EpochBase("0") + ` < ?`
		}

		t.Run("tokens sqlcoord issues are above it", func(t *testing.T) {
			l, err := coord.New(db).Acquire(ctx, "epoch-base", "", 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if l.Token <= base {
				t.Fatalf("lease token %d at or below the epoch base %d", l.Token, base)
			}
		})
		t.Run("a checked write takes a token above it", func(t *testing.T) {
			res, err := db.ExecContext(ctx, write, "above", base+1)
			if err != nil {
				t.Fatal(err)
			}
			if n, _ := res.RowsAffected(); n != 1 {
				t.Fatalf("token %d (base %d): %d rows written, want 1", base+1, base, n)
			}
		})
		t.Run("a checked write refuses a token at it", func(t *testing.T) {
			res, err := db.ExecContext(ctx, write, "at", base)
			if err != nil {
				t.Fatal(err)
			}
			if n, _ := res.RowsAffected(); n != 0 {
				t.Fatalf("token %d at the base: %d rows written, want 0", base, n)
			}
		})
		t.Run("a client that saw a newer epoch is refused", func(t *testing.T) {
			var b sql.NullInt64
			err := db.QueryRowContext(ctx, `SELECT `+d.EpochBase(d.Placeholder(1)), base+1).Scan(&b)
			if d.Family() == "postgres" {
				if !errors.Is(d.Classify(err), sqlcoord.ErrStalePrimary) {
					t.Fatalf("high-water mark above the base: %v (value %v), want ErrStalePrimary", err, b)
				}
				return
			}
			if err != nil || b.Valid {
				t.Fatalf("high-water mark above the base: %v, %v; want NULL", b, err)
			}
		})
	})
}
