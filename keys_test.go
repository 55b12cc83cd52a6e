package sqlcoord_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/coord"
	"github.com/sqlcoord/sqlcoord/coord/ids"
	"github.com/sqlcoord/sqlcoord/coord/jobs"
	"github.com/sqlcoord/sqlcoord/outbox"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
	"github.com/sqlcoord/sqlcoord/txn"
)

// vary returns base and variants of it that must all be distinct keys on
// both dialects (MariaDB's utf8mb4_bin is PAD SPACE: 'id-7' = 'id-7 ').
func vary(base string) []string {
	var out []string
	seen := map[string]bool{}
	for _, v := range []string{base, base + " ", base + "  ", strings.ToUpper(base), strings.ToUpper(base[:1]) + base[1:], " " + base, base + "\t"} {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

var variants = vary("id-7")

// hostile inputs every entry point must refuse with its typed error.
var hostile = []struct{ name, s string }{
	{"invalid UTF-8", "g\xff1"},
	{"another invalid UTF-8", "g\xfe1"},
	{"lone continuation byte", "\x80"},
	{"NUL", "a\x00b"},
	{"empty", ""},
}

func begin(t *testing.T, db *sqlcoord.DB) *sql.Tx {
	t.Helper()
	tx, err := db.BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback() })
	return tx
}

// receive runs Inbox.Receive in a transaction of its own.
func receive(t *testing.T, db *sqlcoord.DB, in *outbox.Inbox[*sql.Tx], id string) (first bool, err error) {
	t.Helper()
	err = txn.Do(context.Background(), db, txn.Options{}, func(ctx context.Context, tx *sql.Tx) error {
		first, err = in.Receive(ctx, tx, id)
		return err
	})
	return first, err
}

// probe runs fn in a transaction that is rolled back at once.
func probe(t *testing.T, db *sqlcoord.DB, fn func(tx *sql.Tx)) {
	t.Helper()
	tx := begin(t, db)
	defer tx.Rollback()
	fn(tx)
}

// Every identifying column of every coord_ table compares byte
// for byte, and every input is validated with a typed error.
func TestKeysAreBytes(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		db := env.DB
		c := coord.New(db)

		t.Run("locks", func(t *testing.T) {
			for _, v := range variants {
				// each variant in its own open transaction: all must be
				// granted at once, none is "held by another"
				if err := c.TryLock(ctx, begin(t, db), "lk-"+v); err != nil {
					t.Fatalf("TryLock(%q) while other variants are held: %v", "lk-"+v, err)
				}
			}
			for _, h := range hostile {
				if err := c.TryLock(ctx, begin(t, db), h.s); !errors.Is(err, coord.ErrInvalidName) {
					t.Errorf("TryLock(%s): %v, want ErrInvalidName", h.name, err)
				}
			}
		})

		t.Run("leases", func(t *testing.T) {
			for i, v := range variants {
				l, err := c.Acquire(ctx, "ls-"+v, "", time.Minute)
				if err != nil {
					t.Fatalf("Acquire(%q) while other variants are held: %v", "ls-"+v, err)
				}
				if l.Token != 1 {
					t.Errorf("variant %d %q got token %d, want 1 (a fresh name)", i, v, l.Token)
				}
			}
			// owners are compared byte for byte too
			if _, err := c.Acquire(ctx, "ls-owner", "owner-a", time.Minute); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Acquire(ctx, "ls-owner", "owner-a ", time.Minute); !errors.Is(err, coord.ErrLeaseHeld) {
				t.Errorf("owner %q acquired a lease held by %q: %v", "owner-a ", "owner-a", err)
			}
			for _, h := range hostile {
				if _, err := c.Acquire(ctx, h.s, "", time.Minute); !errors.Is(err, coord.ErrInvalidName) {
					t.Errorf("Acquire(%s): %v, want ErrInvalidName", h.name, err)
				}
				if h.s != "" {
					if _, err := c.Acquire(ctx, "ls-x", h.s, time.Minute); !errors.Is(err, coord.ErrInvalidName) {
						t.Errorf("Acquire owner %s: %v, want ErrInvalidName", h.name, err)
					}
				}
			}
		})

		t.Run("fences", func(t *testing.T) {
			tx := begin(t, db)
			if err := c.Fence(ctx, tx, "fc-"+variants[0], 100); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			for _, v := range variants[1:] {
				tx := begin(t, db)
				if err := c.Fence(ctx, tx, "fc-"+v, 5); err != nil {
					t.Fatalf("Fence(%q, 5) refused because of %q's 100: %v", "fc-"+v, "fc-"+variants[0], err)
				}
				tx.Commit()
			}
			for _, h := range hostile {
				if err := c.Fence(ctx, begin(t, db), h.s, 1); !errors.Is(err, coord.ErrInvalidName) {
					t.Errorf("Fence(%s): %v, want ErrInvalidName", h.name, err)
				}
			}
		})

		t.Run("idempotency keys", func(t *testing.T) {
			k := txn.NewKeys(db, txn.KeysOptions{})
			for _, v := range variants {
				tx := begin(t, db)
				cl, err := k.Begin(ctx, tx, "coll", v, nil)
				if err != nil {
					t.Fatalf("Begin(%q): %v", v, err)
				}
				if cl.Replay {
					t.Fatalf("Begin(%q) replayed %q: another key's response", v, cl.Response)
				}
				if err := k.Complete(ctx, tx, "coll", v, []byte("resp "+v)); err != nil {
					t.Fatal(err)
				}
				if err := tx.Commit(); err != nil {
					t.Fatal(err)
				}
			}
			for _, v := range variants { // each replays its own response
				probe(t, db, func(tx *sql.Tx) {
					cl, err := k.Begin(ctx, tx, "coll", v, nil)
					if err != nil || !cl.Replay || string(cl.Response) != "resp "+v {
						t.Fatalf("replay of %q: %+v %v", v, cl, err)
					}
				})
			}
			for _, sc := range vary("coll")[1:] { // scopes too
				probe(t, db, func(tx *sql.Tx) {
					cl, err := k.Begin(ctx, tx, sc, "id-7", nil)
					if err != nil || cl.Replay {
						t.Fatalf("scope %q replayed scope %q: %+v %v", sc, "coll", cl, err)
					}
				})
			}
			for _, h := range hostile {
				probe(t, db, func(tx *sql.Tx) {
					if _, err := k.Begin(ctx, tx, "coll", h.s, nil); !errors.Is(err, txn.ErrInvalidKey) {
						t.Errorf("Begin key %s: %v, want ErrInvalidKey", h.name, err)
					}
					if _, err := k.Begin(ctx, tx, h.s, "k", nil); !errors.Is(err, txn.ErrInvalidKey) {
						t.Errorf("Begin scope %s: %v, want ErrInvalidKey", h.name, err)
					}
				})
			}
		})

		t.Run("barrier", func(t *testing.T) {
			b := txn.NewBarrier(db)
			noop := func(context.Context, *sql.Tx) error { return nil }
			// an empty Cancel of (id-7, b1) makes a later Try of exactly
			// that branch a no-op, and of no other
			if _, err := b.Call(ctx, "id-7", "b1", txn.OpCancel, noop); err != nil {
				t.Fatalf("Cancel: %v", err)
			}
			if ran, err := b.Call(ctx, "id-7", "b1", txn.OpTry, noop); err != nil || ran {
				t.Fatalf("Try after its Cancel: ran %v, %v; want skipped", ran, err)
			}
			for _, v := range variants[1:] {
				ran, err := b.Call(ctx, v, "b1", txn.OpTry, noop)
				if err != nil || !ran {
					t.Fatalf("Try(%q) after Cancel(%q): ran %v, %v; want it to run", v, "id-7", ran, err)
				}
			}
			for _, br := range vary("b1")[1:] {
				ran, err := b.Call(ctx, "id-7", br, txn.OpTry, noop)
				if err != nil || !ran {
					t.Fatalf("Try branch %q after Cancel of branch b1: ran %v, %v", br, ran, err)
				}
			}
			for _, h := range hostile {
				if _, err := b.Call(ctx, h.s, "b", txn.OpTry, noop); !errors.Is(err, txn.ErrInvalidBranch) {
					t.Errorf("gid %s: %v, want ErrInvalidBranch", h.name, err)
				}
				if _, err := b.Call(ctx, "g", h.s, txn.OpTry, noop); !errors.Is(err, txn.ErrInvalidBranch) {
					t.Errorf("branch %s: %v, want ErrInvalidBranch", h.name, err)
				}
			}
		})

		t.Run("commit markers", func(t *testing.T) {
			runs := 0
			for _, v := range variants {
				err := txn.Do(ctx, db, txn.Options{CommitMarker: "cm-" + v}, func(context.Context, *sql.Tx) error {
					runs++
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			if runs != len(variants) {
				t.Fatalf("%d of %d distinct markers ran; the others were taken as already committed", runs, len(variants))
			}
			for _, h := range hostile[:4] {
				err := txn.Do(ctx, db, txn.Options{CommitMarker: h.s}, func(context.Context, *sql.Tx) error { return nil })
				if !errors.Is(err, txn.ErrInvalidMarker) {
					t.Errorf("marker %s: %v, want ErrInvalidMarker", h.name, err)
				}
			}
		})

		t.Run("inbox", func(t *testing.T) {
			in, err := outbox.NewInbox(db, "cons-id-7")
			if err != nil {
				t.Fatal(err)
			}
			if first, err := receive(t, db, in, "m-1"); err != nil || !first {
				t.Fatal(first, err)
			}
			for _, v := range variants[1:] {
				in2, err := outbox.NewInbox(db, "cons-"+v)
				if err != nil {
					t.Fatal(err)
				}
				if first, err := receive(t, db, in2, "m-1"); err != nil || !first {
					t.Fatalf("consumer %q dropped a message only %q received: first=%v %v", "cons-"+v, "cons-id-7", first, err)
				}
			}
			for _, m := range vary("m-1")[1:] {
				if first, err := receive(t, db, in, m); err != nil || !first {
					t.Fatalf("message %q dropped as a duplicate of m-1: first=%v %v", m, first, err)
				}
			}
			for _, h := range hostile {
				if _, err := outbox.NewInbox(db, h.s); !errors.Is(err, outbox.ErrInvalid) {
					t.Errorf("consumer %s: %v, want ErrInvalid", h.name, err)
				}
				if _, err := receive(t, db, in, h.s); !errors.Is(err, outbox.ErrInvalid) {
					t.Errorf("message id %s: %v, want ErrInvalid", h.name, err)
				}
			}
		})

		t.Run("outbox topics and keys", func(t *testing.T) {
			o := outbox.New(db)
			for _, v := range variants {
				if err := o.EnqueueNow(ctx, outbox.Msg{Topic: "tp-" + v, Key: "k-" + v, Payload: []byte("x")}); err != nil {
					t.Fatal(err)
				}
			}
			rows, err := db.QueryContext(ctx, `SELECT topic, msg_key FROM coord_outbox WHERE topic LIKE 'tp-%' ORDER BY id`)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			i := 0
			for rows.Next() {
				var topic, key string
				if err := rows.Scan(&topic, &key); err != nil {
					t.Fatal(err)
				}
				if topic != "tp-"+variants[i] || key != "k-"+variants[i] {
					t.Errorf("stored topic %q key %q, want %q %q", topic, key, "tp-"+variants[i], "k-"+variants[i])
				}
				i++
			}
			for _, h := range hostile {
				if err := o.EnqueueNow(ctx, outbox.Msg{Topic: h.s, Payload: []byte("x")}); !errors.Is(err, outbox.ErrInvalid) {
					t.Errorf("topic %s: %v, want ErrInvalid", h.name, err)
				}
				if h.s == "" {
					continue
				}
				if err := o.EnqueueNow(ctx, outbox.Msg{Topic: "t", Key: h.s, Payload: []byte("x")}); !errors.Is(err, outbox.ErrInvalid) {
					t.Errorf("key %s: %v, want ErrInvalid", h.name, err)
				}
			}
		})

		t.Run("segment tags", func(t *testing.T) {
			for _, v := range variants {
				s, err := ids.NewSegments(db, "sg-"+v, ids.SegmentOptions{Step: 10, MinStep: 10, MaxStep: 10, AutoCreate: true})
				if err != nil {
					t.Fatal(err)
				}
				id, err := s.Next(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if id != 1 {
					t.Fatalf("tag %q started at %d: it shares another tag's counter", "sg-"+v, id)
				}
			}
			for _, h := range hostile {
				if _, err := ids.NewSegments(db, h.s, ids.SegmentOptions{AutoCreate: true}); !errors.Is(err, ids.ErrInvalid) {
					t.Errorf("tag %s: %v, want ErrInvalid", h.name, err)
				}
			}
		})

		t.Run("job names", func(t *testing.T) {
			r := jobs.NewRuns(db)
			fire := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
			for _, v := range variants {
				if _, err := r.Claim(ctx, "jb-"+v, fire, 0, 1, "me"); err != nil {
					t.Fatalf("Claim(%q): %v (another job's slot?)", "jb-"+v, err)
				}
			}
			for _, h := range hostile {
				if _, err := r.Claim(ctx, h.s, fire, 0, 1, "me"); !errors.Is(err, jobs.ErrInvalid) {
					t.Errorf("job %s: %v, want ErrInvalid", h.name, err)
				}
			}
		})
	})
}
