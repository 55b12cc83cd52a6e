package outbox_test

import (
	"context"
	"database/sql"
	"sync"
	"testing"

	"github.com/sqlcoord/sqlcoord/migrate"

	"github.com/google/uuid"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/outbox"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
	"github.com/sqlcoord/sqlcoord/txn"
)

// drain publishes every pending message of db through pub once.
func drain(t *testing.T, db *sqlcoord.DB, pub outbox.Publisher) {
	t.Helper()
	r, err := outbox.NewRelay(db, pub, outbox.RelayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for {
		n, err := r.Once(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
	}
}

// A message id means one message, across services, schema
// reinstalls and failovers that reuse the ordering sequence.
func TestMessageIDsAreGlobal(t *testing.T) {
	t.Parallel()
	for _, fam := range dbtest.Families {
		t.Run(fam, func(t *testing.T) {
			ctx := context.Background()
			// two services, each with its own database and outbox, feeding
			// one consumer's inbox
			svcA, svcB, consumer := dbtest.New(t, fam), dbtest.New(t, fam), dbtest.New(t, fam)
			in, err := outbox.NewInbox(consumer.DB, "billing")
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			received, dropped := 0, 0
			var seen []string
			sink := outbox.PublisherFunc(func(ctx context.Context, m outbox.Message) error {
				var first bool
				err := txn.Do(ctx, consumer.DB, txn.Options{}, func(ctx context.Context, tx *sql.Tx) error {
					var err error
					first, err = in.Receive(ctx, tx, m.MessageID())
					return err
				})
				if err != nil {
					return err
				}
				mu.Lock()
				defer mu.Unlock()
				if first {
					received++
				} else {
					dropped++
				}
				seen = append(seen, m.MessageID())
				return nil
			})
			for _, svc := range []*dbtest.Env{svcA, svcB} {
				ob := outbox.New(svc.DB)
				for i := 0; i < 3; i++ {
					if err := ob.EnqueueNow(ctx, outbox.Msg{Topic: "orders", Payload: []byte("x")}); err != nil {
						t.Fatal(err)
					}
				}
				drain(t, svc.DB, sink)
			}
			if received != 6 || dropped != 0 {
				t.Fatalf("two services' messages 1-3: %d received, %d dropped as duplicates (ids %v)", received, dropped, seen)
			}
			for _, id := range seen {
				u, err := uuid.Parse(id)
				if err != nil || u.Version() != 7 {
					t.Errorf("message id %q is not a UUIDv7", id)
				}
			}
			// reinstall the outbox table: the ordering id starts again at 1,
			// the message id does not repeat
			before := len(seen)
			if err := migrate.Migrate(ctx, svcA.DB, migrate.To(5)); err != nil {
				t.Fatal(err)
			}
			if err := migrate.Migrate(ctx, svcA.DB, migrate.Up); err != nil {
				t.Fatal(err)
			}
			if err := outbox.New(svcA.DB).EnqueueNow(ctx, outbox.Msg{Topic: "orders", Payload: []byte("y")}); err != nil {
				t.Fatal(err)
			}
			drain(t, svcA.DB, sink)
			if received != 7 || dropped != 0 {
				t.Fatalf("after migrate down/up: %d received, %d dropped (new id %s, earlier %v)", received, dropped, seen[len(seen)-1], seen[:before])
			}
		})
	}
}
