package txn_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sqlcoord/sqlcoord/outbox"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
	"github.com/sqlcoord/sqlcoord/txn"
)

// The helpers that run in the caller's transaction decide
// on unique indexes and locking statements, never on a plain read that an
// older snapshot could answer. Each runs here at every isolation level
// after the transaction already read the table (on MySQL/MariaDB
// REPEATABLE READ that fixes the read view before the helper runs): 8
// concurrent duplicates per key, one effect per key, every duplicate told.
func TestHelpersAtEveryIsolationLevel(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		db := env.DB
		dbtest.Exec(t, db, `CREATE TABLE effects (id VARCHAR(80) NOT NULL, helper VARCHAR(20) NOT NULL)`)
		ph := db.Dialect().Placeholder
		keys := txn.NewKeys(db, txn.KeysOptions{})
		barrier := txn.NewBarrier(db)
		inbox, err := outbox.NewInbox(db, "audit")
		if err != nil {
			t.Fatal(err)
		}
		// each helper: run in tx, report whether this call did the effect
		helpers := map[string]func(ctx context.Context, tx *sql.Tx, id string) (bool, error){
			"keys-begin": func(ctx context.Context, tx *sql.Tx, id string) (bool, error) {
				c, err := keys.Begin(ctx, tx, "audit", id, nil)
				if err != nil || c.Replay {
					return false, err
				}
				return true, keys.Complete(ctx, tx, "audit", id, []byte("done"))
			},
			"keys-record": func(ctx context.Context, tx *sql.Tx, id string) (bool, error) {
				c, err := keys.Record(ctx, tx, "audit-r", id, nil, []byte("done"))
				if c.Replay {
					return false, errAuditReplay
				}
				return err == nil, err
			},
			"barrier": func(ctx context.Context, tx *sql.Tx, id string) (bool, error) {
				return barrier.CallTx(ctx, tx, id, "b1", txn.OpAction, func(context.Context, *sql.Tx) error { return nil })
			},
			"inbox": func(ctx context.Context, tx *sql.Tx, id string) (bool, error) {
				return inbox.Receive(ctx, tx, id)
			},
		}
		for _, iso := range []sql.IsolationLevel{sql.LevelReadCommitted, sql.LevelRepeatableRead, sql.LevelSerializable} {
			for name, helper := range helpers {
				t.Run(strings.ReplaceAll(iso.String(), " ", "-")+"/"+name, func(t *testing.T) {
					ctx := context.Background()
					for round := 0; round < 10; round++ {
						id := fmt.Sprintf("%s-%d-%d", name, iso, round)
						var did atomic.Int64
						var wg sync.WaitGroup
						errs := make(chan error, 8)
						for i := 0; i < 8; i++ {
							wg.Add(1)
							go func() {
								defer wg.Done()
								err := txn.Do(ctx, db, txn.Options{Isolation: iso, MaxAttempts: 50}, func(ctx context.Context, tx *sql.Tx) error {
									var n int // fixes the read view (MySQL RR) before the helper
									if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM effects`).Scan(&n); err != nil {
										return err
									}
									first, err := helper(ctx, tx, id)
									if err == errAuditReplay {
										return nil
									}
									if err != nil || !first {
										return err
									}
									if _, err := tx.ExecContext(ctx, `INSERT INTO effects (id, helper) VALUES (`+ph(1)+`, `+ph(2)+`)`, id, name); err != nil {
										return err
									}
									did.Add(1)
									return nil
								})
								if err != nil {
									errs <- err
								}
							}()
						}
						wg.Wait()
						close(errs)
						for err := range errs {
							t.Fatalf("round %d: %v", round, err)
						}
						if n := dbtest.Count(t, db, `SELECT count(*) FROM effects WHERE id = `+ph(1), id); n != 1 {
							t.Fatalf("round %d: %d effects committed for one key", round, n)
						}
					}
				})
			}
		}
	})
}

var errAuditReplay = fmt.Errorf("replay")
