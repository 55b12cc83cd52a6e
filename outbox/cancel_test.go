package outbox_test

import (
	"context"
	"database/sql"
	"errors"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/coord/ids"
	"github.com/sqlcoord/sqlcoord/outbox"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

func TestCancel(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		ob := outbox.New(env.DB)
		newID := func() string { u, _ := ids.NewUUIDv7(); return u.String() }
		inTx := func(fn func(tx *sql.Tx) error, commit bool) error {
			tx, err := env.DB.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			defer tx.Rollback()
			if err := fn(tx); err != nil {
				return err
			}
			if commit {
				return tx.Commit()
			}
			return tx.Rollback()
		}
		t.Run("a delayed message cancelled by a committed transaction is never published", func(t *testing.T) {
			id := newID()
			if err := ob.EnqueueNow(ctx, outbox.Msg{Topic: "close-order", Payload: []byte("42"), Delay: time.Hour, ID: id}); err != nil {
				t.Fatal(err)
			}
			if err := inTx(func(tx *sql.Tx) error { return ob.Cancel(ctx, tx, id) }, true); err != nil {
				t.Fatal(err)
			}
			if n := dbtest.Count(t, env.DB, `SELECT count(*) FROM coord_outbox WHERE topic = 'close-order'`); n != 0 {
				t.Fatalf("%d rows left", n)
			}
			if err := inTx(func(tx *sql.Tx) error { return ob.Cancel(ctx, tx, id) }, true); !errors.Is(err, outbox.ErrNoMessage) {
				t.Fatalf("second cancel: %v, want ErrNoMessage", err)
			}
		})
		t.Run("a rolled-back cancel changes nothing", func(t *testing.T) {
			id := newID()
			ob.EnqueueNow(ctx, outbox.Msg{Topic: "close-order-2", Delay: time.Hour, ID: id})
			if err := inTx(func(tx *sql.Tx) error { return ob.Cancel(ctx, tx, id) }, false); err != nil {
				t.Fatal(err)
			}
			if n := dbtest.Count(t, env.DB, `SELECT count(*) FROM coord_outbox WHERE topic = 'close-order-2' AND state = 'pending'`); n != 1 {
				t.Fatalf("after a rolled-back cancel: %d pending", n)
			}
		})
		t.Run("refused once published, while being published, and for bad ids", func(t *testing.T) {
			id := newID()
			ob.EnqueueNow(ctx, outbox.Msg{Topic: "now", ID: id})
			claimed := make(chan struct{})
			release := make(chan struct{})
			r, _ := outbox.NewRelay(env.DB, outbox.PublisherFunc(func(ctx context.Context, m outbox.Message) error {
				if m.UUID == id {
					close(claimed)
					<-release
				}
				return nil
			}), outbox.RelayOptions{Listen: outbox.ListenOff})
			done := make(chan error, 1)
			go func() { _, err := r.Once(ctx); done <- err }()
			<-claimed
			start := time.Now()
			err := inTx(func(tx *sql.Tx) error { return ob.Cancel(ctx, tx, id) }, true)
			if !errors.Is(err, outbox.ErrNotPending) || time.Since(start) > 2*time.Second {
				t.Fatalf("cancel while a relay publishes: %v after %v, want ErrNotPending at once", err, time.Since(start))
			}
			close(release)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if err := inTx(func(tx *sql.Tx) error { return ob.Cancel(ctx, tx, id) }, true); !errors.Is(err, outbox.ErrNotPending) {
				t.Fatalf("cancel after publishing: %v, want ErrNotPending", err)
			}
			for _, bad := range []string{"", "nope", "00000000-0000-0000-0000-00000000000g", "{" + id + "}"} {
				if err := inTx(func(tx *sql.Tx) error { return ob.Cancel(ctx, tx, bad) }, true); !errors.Is(err, outbox.ErrInvalid) {
					t.Errorf("cancel %q: %v, want ErrInvalid", bad, err)
				}
			}
			if err := ob.EnqueueNow(ctx, outbox.Msg{Topic: "dup", ID: id}); !errors.Is(err, sqlcoord.ErrDuplicate) {
				t.Errorf("enqueue with a used id: %v, want ErrDuplicate", err)
			}
		})
	})
}

// Cancels race two relay processes over 400 messages due within 40 ms:
// every message ends either published or cancelled — never both, never
// neither — and a cancel that committed was never published.
func TestCancelRacesRelays(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("spawns relay processes")
	}
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		var mu sync.Mutex
		delivered := map[string]int{}
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			delivered[r.Header.Get("Idempotency-Key")]++
			mu.Unlock()
		}))
		defer srv.Close()
		ob := outbox.New(env.DB)
		const n = 400
		all := make([]string, n)
		for i := range all {
			u, _ := ids.NewUUIDv7()
			all[i] = u.String()
		}
		for i := 0; i < n; i += 50 {
			var msgs []outbox.Msg
			for _, id := range all[i : i+50] {
				msgs = append(msgs, outbox.Msg{Topic: "race", ID: id, Delay: time.Duration(rand.IntN(40)) * time.Millisecond})
			}
			if err := ob.EnqueueNow(ctx, msgs...); err != nil {
				t.Fatal(err)
			}
		}
		for i := 0; i < 2; i++ {
			p := dbtest.Spawn(t, "relay", "DSN="+env.DSN, "URL="+srv.URL)
			p.WaitLine(t, "RELAY UP", 20*time.Second)
		}
		var cancelled, refused sync.Map
		var wg sync.WaitGroup
		work := make(chan string)
		for w := 0; w < 8; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for id := range work {
					tx, err := env.DB.BeginTx(ctx, nil)
					if err != nil {
						t.Error(err)
						return
					}
					err = ob.Cancel(ctx, tx, id)
					switch {
					case err == nil:
						if err := tx.Commit(); err != nil {
							t.Errorf("commit of cancel %s: %v", id, err)
						} else {
							cancelled.Store(id, true)
						}
					case errors.Is(err, outbox.ErrNotPending):
						tx.Rollback()
						refused.Store(id, true)
					default:
						tx.Rollback()
						t.Errorf("cancel %s: %v", id, err)
					}
				}
			}()
		}
		for _, i := range rand.Perm(n) {
			work <- all[i]
			if rand.IntN(8) == 0 {
				time.Sleep(time.Millisecond)
			}
		}
		close(work)
		wg.Wait()
		deadline := time.Now().Add(60 * time.Second)
		for dbtest.Count(t, env.DB, `SELECT count(*) FROM coord_outbox WHERE state = 'pending'`) > 0 {
			if time.Now().After(deadline) {
				t.Fatal("messages still pending after 60 s")
			}
			time.Sleep(50 * time.Millisecond)
		}
		time.Sleep(300 * time.Millisecond) // the last batch's HTTP calls
		mu.Lock()
		defer mu.Unlock()
		nc, nr := 0, 0
		for _, id := range all {
			_, c := cancelled.Load(id)
			_, r := refused.Load(id)
			d := delivered[id] > 0
			switch {
			case c && d:
				t.Errorf("%s was cancelled by a committed transaction and published", id)
			case !c && !d:
				t.Errorf("%s was neither cancelled nor published", id)
			case r && !d:
				t.Errorf("%s: cancel refused, but it was never published", id)
			}
			if c {
				nc++
			}
			if r {
				nr++
			}
		}
		t.Logf("%d messages: %d cancelled, %d refused (already published or being published), %d published", n, nc, nr, len(delivered))
	})
}
