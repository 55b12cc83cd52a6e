package sqlcoord_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord/coord"
	"github.com/sqlcoord/sqlcoord/coord/jobs"
	"github.com/sqlcoord/sqlcoord/membership"
	"github.com/sqlcoord/sqlcoord/outbox"
	"github.com/sqlcoord/sqlcoord/saga"
	"github.com/sqlcoord/sqlcoord/session"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
	"github.com/sqlcoord/sqlcoord/txn"
)

// TestLengthsAreCheckedBeforeTheDatabase: on PostgreSQL the tables written
// on every operation have no CHECK constraints (migrations 23 and 24), so
// the client's validation is what keeps an empty or over-long name, key,
// topic, message id, barrier id, commit marker, job name, group, member
// id, election name, user id or gid (and a shard outside its total) out
// of them: each helper must refuse one with its typed error and leave no
// row behind, on both dialects.
func TestLengthsAreCheckedBeforeTheDatabase(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		db := env.DB
		c := coord.New(db)
		keys := txn.NewKeys(db, txn.KeysOptions{})
		ob := outbox.New(db)
		runs := jobs.NewRuns(db)
		sessions, err := session.NewStore(db, session.Options{})
		if err != nil {
			t.Fatal(err)
		}
		sagas, err := saga.New(db, saga.Options{})
		if err != nil {
			t.Fatal(err)
		}
		branches := []saga.Branch{{Name: "debit", Target: "debit"}}
		inTx := func(fn func(tx *sql.Tx) error) error {
			return txn.Do(ctx, db, txn.Options{}, func(_ context.Context, tx *sql.Tx) error { return fn(tx) })
		}
		type lengthCase struct {
			name, table string
			want        error
			run         func() error
		}
		// refused runs tc as a subtest: it must fail with tc.want and leave
		// tc.table's row count as it was.
		refused := func(tc lengthCase, what string) {
			t.Run(tc.name+"/"+what, func(t *testing.T) {
				var before, after int
				count := `SELECT count(*) FROM ` + tc.table
				if err := db.QueryRowContext(ctx, count).Scan(&before); err != nil {
					t.Fatal(err)
				}
				err := tc.run()
				if !errors.Is(err, tc.want) {
					t.Fatalf("%s %s: got %v, want %v", tc.name, what, err, tc.want)
				}
				if err := db.QueryRowContext(ctx, count).Scan(&after); err != nil {
					t.Fatal(err)
				}
				if after != before {
					t.Fatalf("%s %s: %s went from %d to %d rows", tc.name, what, tc.table, before, after)
				}
			})
		}
		for _, bad := range []struct{ what, s string }{{"empty", ""}, {"256 bytes", strings.Repeat("n", 256)}, {"128 two-byte characters", strings.Repeat("é", 128)}} {
			cases := []lengthCase{
				{"lease", "coord_leases", coord.ErrInvalidName, func() error {
					_, err := c.Acquire(ctx, bad.s, "", time.Minute)
					return err
				}},
				{"fence", "coord_fences", coord.ErrInvalidName, func() error {
					return inTx(func(tx *sql.Tx) error { return c.Fence(ctx, tx, bad.s, 1) })
				}},
				{"lock", "coord_locks", coord.ErrInvalidName, func() error {
					return inTx(func(tx *sql.Tx) error { return c.TryLock(ctx, tx, bad.s) })
				}},
				{"idempotency key", "coord_idempotency", txn.ErrInvalidKey, func() error {
					return inTx(func(tx *sql.Tx) error {
						_, err := keys.Begin(ctx, tx, "scope", bad.s, nil)
						return err
					})
				}},
				{"idempotency scope", "coord_idempotency", txn.ErrInvalidKey, func() error {
					return inTx(func(tx *sql.Tx) error {
						_, err := keys.Record(ctx, tx, bad.s, "key", nil, nil)
						return err
					})
				}},
				{"outbox topic", "coord_outbox", outbox.ErrInvalid, func() error {
					return inTx(func(tx *sql.Tx) error { return ob.Enqueue(ctx, tx, outbox.Msg{Topic: bad.s, Payload: []byte("x")}) })
				}},
				{"inbox consumer", "coord_inbox", outbox.ErrInvalid, func() error {
					_, err := outbox.NewInbox(db, bad.s)
					return err
				}},
				{"inbox message id", "coord_inbox", outbox.ErrInvalid, func() error {
					in, err := outbox.NewInbox(db, "consumer")
					if err != nil {
						return err // not the typed error wanted: the subtest fails with it
					}
					return inTx(func(tx *sql.Tx) error {
						_, err := in.Receive(ctx, tx, bad.s)
						return err
					})
				}},
				{"barrier gid", "coord_txn_barrier", txn.ErrInvalidBranch, func() error {
					_, err := txn.NewBarrier(db).Try(ctx, bad.s, "branch", func(context.Context, *sql.Tx) error { return nil })
					return err
				}},
				{"barrier branch", "coord_txn_barrier", txn.ErrInvalidBranch, func() error {
					_, err := txn.NewBarrier(db).Try(ctx, "gid", bad.s, func(context.Context, *sql.Tx) error { return nil })
					return err
				}},
			}
			cases = append(cases,
				lengthCase{"job name", "coord_job_runs", jobs.ErrInvalid, func() error {
					_, err := runs.Claim(ctx, bad.s, time.Now(), 0, 1, "owner")
					return err
				}},
				lengthCase{"member group", "coord_members", membership.ErrInvalid, func() error {
					m, err := membership.Join(ctx, db, bad.s, membership.Options{})
					if err == nil {
						m.Leave(ctx)
					}
					return err
				}},
				lengthCase{"election name", "coord_election_terms", coord.ErrInvalidName, func() error {
					_, err := c.Election(bad.s, coord.ElectionOptions{})
					return err
				}})
			if bad.s != "" { // an empty CommitMarker means none; an empty member id, user id or gid is made up
				cases = append(cases,
					lengthCase{"commit marker", "coord_txn_commits", txn.ErrInvalidMarker, func() error {
						return txn.Do(ctx, db, txn.Options{CommitMarker: bad.s}, func(context.Context, *sql.Tx) error { return nil })
					}},
					lengthCase{"member id", "coord_members", membership.ErrInvalid, func() error {
						m, err := membership.Join(ctx, db, "group", membership.Options{ID: bad.s})
						if err == nil {
							m.Leave(ctx)
						}
						return err
					}},
					lengthCase{"session user id", "coord_sessions", session.ErrInvalid, func() error {
						return inTx(func(tx *sql.Tx) error {
							_, _, err := sessions.Create(ctx, tx, bad.s, nil)
							return err
						})
					}},
					lengthCase{"saga gid", "coord_gtx", saga.ErrInvalid, func() error {
						return inTx(func(tx *sql.Tx) error {
							_, err := sagas.Begin(ctx, tx, saga.Global{GID: bad.s, Mode: saga.ModeSaga, Branches: branches})
							return err
						})
					}})
			}
			for _, tc := range cases {
				refused(tc, bad.what)
			}
		}
		// a shard outside its total (the check shard_total > shard was the table's)
		refused(lengthCase{"job shard", "coord_job_runs", jobs.ErrInvalid, func() error {
			_, err := runs.Claim(ctx, "job", time.Now(), 1, 1, "owner")
			return err
		}}, "1 of 1")
	})
}
