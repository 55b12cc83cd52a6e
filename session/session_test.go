package session_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/session"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

func TestMain(m *testing.M) {
	dbtest.MainWithHelpers(m, map[string]dbtest.HelperFunc{"updater": runUpdater})
}

// runUpdater is a helper process appending "<tag>-<i>," to the session's
// data N times with Update.
func runUpdater(ctx context.Context, db *sqlcoord.DB) error {
	st, err := session.NewStore(db, session.Options{})
	if err != nil {
		return err
	}
	n, _ := strconv.Atoi(os.Getenv("N"))
	for i := 0; i < n; i++ {
		entry := fmt.Sprintf("%s-%d,", os.Getenv("TAG"), i)
		if _, err := st.Update(ctx, os.Getenv("TOKEN"), func(d []byte) ([]byte, error) { return append(d, entry...), nil }); err != nil {
			return err
		}
	}
	fmt.Println("DONE")
	return nil
}

func create(t *testing.T, st *session.Store[*sql.Tx], db *sqlcoord.DB, user string, data []byte) (string, session.Session) {
	t.Helper()
	tx, err := db.BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	tok, s, err := st.Create(context.Background(), tx, user, data)
	if err != nil {
		tx.Rollback()
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return tok, s
}

func TestSessions(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		st, err := session.NewStore(env.DB, session.Options{IdleTimeout: 2 * time.Second, AbsoluteTimeout: time.Hour})
		if err != nil {
			t.Fatal(err)
		}

		t.Run("the database holds only the token's hash", func(t *testing.T) {
			tok, _ := create(t, st, env.DB, "alice", []byte("cart=1"))
			var n int
			if err := env.DB.QueryRowContext(ctx, `SELECT count(*) FROM coord_sessions WHERE id_hash = `+env.DB.Dialect().Placeholder(1), []byte(tok)).Scan(&n); err != nil || n != 0 {
				t.Fatalf("the raw token is a key: %d %v", n, err)
			}
			rows, err := env.DB.QueryContext(ctx, `SELECT id_hash, user_id, data FROM coord_sessions`)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			for rows.Next() {
				var h, u, d []byte
				rows.Scan(&h, &u, &d)
				if bytes.Contains(h, []byte(tok)) || bytes.Contains(d, []byte(tok)) || len(h) != 32 {
					t.Fatalf("token found in a row")
				}
			}
		})

		t.Run("a lost race is ErrConflict, not a lost write", func(t *testing.T) {
			tok, _ := create(t, st, env.DB, "bob", nil)
			a, err := st.Load(ctx, tok)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := st.Load(ctx, tok)
			a.Data = []byte("from a")
			b.Data = []byte("from b")
			save := func(s session.Session) error {
				tx, _ := env.DB.BeginTx(ctx, nil)
				defer tx.Rollback()
				if _, err := st.Save(ctx, tx, s); err != nil {
					return err
				}
				return tx.Commit()
			}
			if err := save(a); err != nil {
				t.Fatal(err)
			}
			if err := save(b); !errors.Is(err, session.ErrConflict) {
				t.Fatalf("second save of the same version: %v, want ErrConflict", err)
			}
		})

		t.Run("20 concurrent requests and 2 processes lose no update", func(t *testing.T) {
			tok, _ := create(t, st, env.DB, "carol", nil)
			procs := []*dbtest.Proc{}
			for p := 0; p < 2; p++ {
				procs = append(procs, dbtest.Spawn(t, "updater", "DSN="+env.DSN, "TOKEN="+tok, "N=10", fmt.Sprintf("TAG=proc%d", p)))
			}
			var wg sync.WaitGroup
			errs := make(chan error, 20)
			for g := 0; g < 20; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < 5; i++ {
						entry := fmt.Sprintf("g%d-%d,", g, i)
						if _, err := st.Update(ctx, tok, func(d []byte) ([]byte, error) { return append(d, entry...), nil }); err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			wg.Wait()
			for _, p := range procs {
				p.WaitLine(t, "DONE", time.Minute)
			}
			close(errs)
			for err := range errs {
				t.Fatalf("update: %v", err)
			}
			s, err := st.Load(ctx, tok)
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Count(string(s.Data), ",")
			if got != 20*5+2*10 {
				t.Fatalf("%d updates survived of %d", got, 20*5+2*10)
			}
		})

		t.Run("rotation invalidates the old token (fixation)", func(t *testing.T) {
			pre, _ := create(t, st, env.DB, "", []byte("anon"))
			tx, _ := env.DB.BeginTx(ctx, nil)
			post, s, err := st.Rotate(ctx, tx, pre, "dave") // login
			if err != nil || s.UserID != "dave" || string(s.Data) != "anon" {
				t.Fatalf("rotate: %+v %v", s, err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			if _, err := st.Load(ctx, pre); !errors.Is(err, session.ErrNotFound) {
				t.Fatalf("the pre-login token after login: %v, want ErrNotFound", err)
			}
			if s, err := st.Load(ctx, post); err != nil || s.UserID != "dave" {
				t.Fatalf("the new token: %+v %v", s, err)
			}
		})

		t.Run("revoke and revoke-all end sessions for every instance", func(t *testing.T) {
			other := env.Open(t) // another instance of the application
			st2, _ := session.NewStore(other, session.Options{IdleTimeout: 2 * time.Second, AbsoluteTimeout: time.Hour})
			t1, _ := create(t, st, env.DB, "erin", nil)
			t2, _ := create(t, st, env.DB, "erin", nil)
			t3, _ := create(t, st, env.DB, "frank", nil)
			if err := st.Revoke(ctx, t1); err != nil {
				t.Fatal(err)
			}
			if _, err := st2.Load(ctx, t1); !errors.Is(err, session.ErrNotFound) {
				t.Fatalf("revoked token on another instance: %v", err)
			}
			if n, err := st.RevokeAllForUser(ctx, "erin"); err != nil || n != 1 {
				t.Fatalf("revoke all: %d %v", n, err)
			}
			if _, err := st2.Load(ctx, t2); !errors.Is(err, session.ErrNotFound) {
				t.Fatalf("after revoke-all: %v", err)
			}
			if _, err := st2.Load(ctx, t3); err != nil {
				t.Fatalf("another user's session: %v", err)
			}
		})

		t.Run("idle expiry by the database clock, renewal only past half the window", func(t *testing.T) {
			tok, s0 := create(t, st, env.DB, "gina", nil)
			time.Sleep(300 * time.Millisecond)
			s1, err := st.Load(ctx, tok)
			if err != nil || !s1.LastSeenAt.Equal(s0.LastSeenAt) {
				t.Fatalf("early load wrote: %v → %v (%v)", s0.LastSeenAt, s1.LastSeenAt, err)
			}
			time.Sleep(900 * time.Millisecond) // past half of the 2s idle window
			s2, err := st.Load(ctx, tok)
			if err != nil || !s2.LastSeenAt.After(s1.LastSeenAt) || !s2.IdleExpiresAt.After(s1.IdleExpiresAt) {
				t.Fatalf("late load did not renew: %+v %v", s2, err)
			}
			time.Sleep(2200 * time.Millisecond)
			if _, err := st.Load(ctx, tok); !errors.Is(err, session.ErrNotFound) {
				t.Fatalf("after the idle timeout: %v, want ErrNotFound", err)
			}
			if n, err := session.Cleanup(ctx, env.DB, 0, 10); err != nil || n < 1 {
				t.Fatalf("cleanup: %d %v", n, err)
			}
		})

		t.Run("bad input", func(t *testing.T) {
			if _, err := session.NewStore(env.DB, session.Options{IdleTimeout: -time.Second}); !errors.Is(err, session.ErrInvalid) {
				t.Errorf("negative idle timeout: %v", err)
			}
			for _, tok := range []string{"", "nope", strings.Repeat("x", 1000), "\xff\xfe"} {
				if _, err := st.Load(ctx, tok); !errors.Is(err, session.ErrNotFound) {
					t.Errorf("Load(%q): %v", tok, err)
				}
			}
			tx, _ := env.DB.BeginTx(ctx, nil)
			defer tx.Rollback()
			if _, _, err := st.Create(ctx, tx, "bad\xffuser", nil); !errors.Is(err, session.ErrInvalid) {
				t.Errorf("invalid UTF-8 user: %v", err)
			}
			if _, err := st.RevokeAllForUser(ctx, ""); !errors.Is(err, session.ErrInvalid) {
				t.Errorf("empty user: %v", err)
			}
		})
	})
}
