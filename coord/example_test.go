package coord_test

import (
	"context"
	"database/sql"
	"errors"
	"log"
	"os"
	"time"

	_ "github.com/sqlcoord/sqlcoord/pgxv5" // registers pgx's database/sql driver "pgx", and LISTEN/NOTIFY for sqlcoord

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/coord"
	"github.com/sqlcoord/sqlcoord/txn"
)

func open() *sqlcoord.DB {
	db, err := sqlcoord.Open(context.Background(), os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	return db
}

// A read-modify-write under a lock: the lock first in the transaction,
// then the reads it protects (at READ COMMITTED on PostgreSQL).
func ExampleClient_TryLock() {
	ctx := context.Background()
	db := open()
	locks := coord.New(db)
	err := txn.Do(ctx, db, txn.Options{Isolation: sql.LevelReadCommitted}, func(ctx context.Context, tx *sql.Tx) error {
		if err := locks.TryLock(ctx, tx, "stock:book-42"); err != nil {
			return err // errors.Is(err, sqlcoord.ErrLocked): someone else is on it
		}
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT quantity FROM stock WHERE sku = 'book-42'`).Scan(&n); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `UPDATE stock SET quantity = $1 WHERE sku = 'book-42'`, n-1)
		return err
	})
	if errors.Is(err, sqlcoord.ErrLocked) {
		log.Print("busy, try later")
	}
}

// Lock waits (bounded) instead of failing at once.
func ExampleClient_Lock() {
	ctx := context.Background()
	db := open()
	locks := coord.New(db)
	err := txn.Do(ctx, db, txn.Options{}, func(ctx context.Context, tx *sql.Tx) error {
		if err := locks.Lock(ctx, tx, "report:nightly", 5*time.Second); err != nil {
			return err // ErrLockTimeout after 5 s
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO reports (day) VALUES (current_date)`)
		return err
	})
	if err != nil {
		log.Fatal(err)
	}
}

// A lease whose holder may pause: keep it alive, and fence every write
// with its token so a holder that lost it cannot write.
func ExampleClient_Acquire() {
	ctx := context.Background()
	db := open()
	c := coord.New(db)
	lease, err := c.Acquire(ctx, "compactor", "", 30*time.Second)
	if errors.Is(err, coord.ErrLeaseHeld) {
		return // another instance is the compactor
	}
	if err != nil {
		log.Fatal(err)
	}
	keeper, err := c.KeepAlive(ctx, lease, coord.KeepAliveOptions{})
	if err != nil {
		log.Fatal(err)
	}
	// on shutdown, hand the lease back: the next instance need not wait a TTL
	defer keeper.Release(context.WithoutCancel(ctx))
	work := keeper.Context() // ends when the lease is lost
	err = txn.Do(work, db, txn.Options{}, func(ctx context.Context, tx *sql.Tx) error {
		if err := c.Fence(ctx, tx, "segments", lease.Token); err != nil {
			return err // ErrStaleToken: a newer holder has written
		}
		_, err := tx.ExecContext(ctx, `DELETE FROM segments WHERE merged`)
		return err
	})
	if err != nil {
		log.Print(err)
	}
}

// One leader among the instances runs the compaction; its writes carry
// its term, so a deposed leader's late write is refused by the row.
func ExampleElection_Run() {
	ctx := context.Background()
	db := open()
	c := coord.New(db)
	e, err := c.Election("compactor", coord.ElectionOptions{TTL: 10 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	err = e.Run(ctx, "10.0.0.7:8080", coord.LeaderCallbacks{
		OnStartedLeading: func(ctx context.Context, l *coord.Leadership) {
			for ctx.Err() == nil {
				_ = txn.Do(ctx, db, txn.Options{}, func(ctx context.Context, tx *sql.Tx) error {
					if err := c.Fence(ctx, tx, "compaction", l.Term()); err != nil {
						return err // coord.ErrStaleToken: a newer leader wrote
					}
					_, err := tx.ExecContext(ctx, `DELETE FROM events WHERE created_at < now() - interval '30 days'`)
					return err
				})
				time.Sleep(time.Minute)
			}
		},
		OnNewLeader: func(l coord.Leader) { log.Printf("leader %s (term %d) at %s", l.ID, l.Term, l.Value) },
	})
	log.Print(err) // ctx's cause once ctx ends
}

// At most 4 exports at once across every instance.
func ExampleSemaphore_Acquire() {
	ctx := context.Background()
	c := coord.New(open())
	s, err := c.Semaphore("exports", 4)
	if err != nil {
		log.Fatal(err)
	}
	p, err := s.Acquire(ctx, "", time.Minute) // waits its turn
	if err != nil {
		log.Fatal(err)
	}
	k, err := s.KeepAlive(ctx, p, coord.KeepAliveOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer k.Release(context.WithoutCancel(ctx))
	log.Printf("export running in slot %d with token %d", p.Slot, p.Token)
}
