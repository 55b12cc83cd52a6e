package membership_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/membership"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

func TestMain(m *testing.M) {
	dbtest.MainWithHelpers(m, map[string]dbtest.HelperFunc{"member": runMember, "stopper": runStopper})
}

// runMember joins the group as ID and stays until killed.
func runMember(ctx context.Context, db *sqlcoord.DB) error {
	m, err := membership.Join(ctx, db, "workers", membership.Options{ID: os.Getenv("ID"), TTL: 500 * time.Millisecond})
	if err != nil {
		return err
	}
	fmt.Println("JOINED")
	<-m.Ctx().Done()
	return nil
}

func ids(ms []membership.Member) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.ID)
	}
	return out
}

func TestMembership(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		list := func() []string {
			ms, err := membership.Members(ctx, env.DB, "workers")
			if err != nil {
				t.Fatal(err)
			}
			return ids(ms)
		}
		a, err := membership.Join(ctx, env.DB, "workers", membership.Options{ID: "a", TTL: 300 * time.Millisecond, Meta: []byte("10.0.0.1:8080")})
		if err != nil {
			t.Fatal(err)
		}
		b, err := membership.Join(ctx, env.Open(t), "workers", membership.Options{ID: "b", TTL: 300 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Run("live members, kept by heartbeats past the TTL", func(t *testing.T) {
			time.Sleep(700 * time.Millisecond) // > 2 TTLs: only heartbeats keep them
			if got := fmt.Sprint(list()); got != "[a b]" {
				t.Fatalf("members %s, want [a b]", got)
			}
		})
		t.Run("leave removes at once", func(t *testing.T) {
			if err := a.Leave(ctx); err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprint(list()); got != "[b]" {
				t.Fatalf("after a left: %s", got)
			}
			if a.Ctx().Err() == nil {
				t.Fatal("Ctx still live after Leave")
			}
		})
		t.Run("a killed process drops out after its TTL", func(t *testing.T) {
			p := dbtest.Spawn(t, "member", "DSN="+env.DSN, "ID=k")
			p.WaitLine(t, "JOINED", 30*time.Second)
			if got := fmt.Sprint(list()); got != "[b k]" {
				t.Fatalf("with the helper: %s", got)
			}
			p.Kill()
			deadline := time.Now().Add(5 * time.Second)
			for fmt.Sprint(list()) != "[b]" {
				if time.Now().After(deadline) {
					t.Fatalf("killed member still listed: %s", list())
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
		t.Run("Ctx ends with ErrLost when the row is gone", func(t *testing.T) {
			dbtest.Exec(t, env.DB, env.DB.Rebind(`DELETE FROM coord_members WHERE member_id = ?`), "b")
			select {
			case <-b.Ctx().Done():
				if !errors.Is(context.Cause(b.Ctx()), membership.ErrLost) {
					t.Fatalf("cause %v, want ErrLost", context.Cause(b.Ctx()))
				}
			case <-time.After(2 * time.Second):
				t.Fatal("Ctx still live after the row was removed")
			}
		})
		t.Run("watch reports joins and leaves", func(t *testing.T) {
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			ch, err := membership.Watch(wctx, env.DB, "watched", 20*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			if first := <-ch; len(first) != 0 {
				t.Fatalf("first list %v, want empty", ids(first))
			}
			c, err := membership.Join(ctx, env.DB, "watched", membership.Options{ID: "c", TTL: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			select {
			case got := <-ch:
				if fmt.Sprint(ids(got)) != "[c]" {
					t.Fatalf("after join: %v", ids(got))
				}
			case <-time.After(3 * time.Second):
				t.Fatal("no change reported after a join")
			}
			c.Leave(ctx)
			select {
			case got := <-ch:
				if len(got) != 0 {
					t.Fatalf("after leave: %v", ids(got))
				}
			case <-time.After(3 * time.Second):
				t.Fatal("no change reported after a leave")
			}
		})
		t.Run("bad input", func(t *testing.T) {
			for _, o := range []struct {
				group string
				opt   membership.Options
			}{{"", membership.Options{}}, {"g", membership.Options{TTL: time.Millisecond}}, {"g", membership.Options{ID: "a\xff"}}, {"g\x00", membership.Options{}}} {
				if _, err := membership.Join(ctx, env.DB, o.group, o.opt); !errors.Is(err, membership.ErrInvalid) {
					t.Errorf("Join(%q, %+v): %v", o.group, o.opt, err)
				}
			}
			if _, err := membership.Watch(ctx, env.DB, "g", -time.Second); !errors.Is(err, membership.ErrInvalid) {
				t.Errorf("negative watch interval: %v", err)
			}
		})
	})
}

// runStopper joins with a short TTL, then reports when its membership
// ends, and whether it still believed itself a member at that point.
func runStopper(ctx context.Context, db *sqlcoord.DB) error {
	m, err := membership.Join(ctx, db, "workers", membership.Options{ID: os.Getenv("ID"), TTL: 600 * time.Millisecond})
	if err != nil {
		return err
	}
	fmt.Println("JOINED")
	// A loop that acts only while a member: after a freeze past the TTL
	// it must see that it is not one before acting again.
	// A stall without SIGSTOP can also make a gap past the TTL while the
	// heartbeats go on succeeding — the member then really is one; the test
	// ignores what was printed before the freeze.
	last := time.Now()
	for m.Ctx().Err() == nil && m.Valid() {
		if gap := time.Since(last); gap > 600*time.Millisecond {
			fmt.Printf("ACTED AFTER A GAP OF %v PAST THE TTL\n", gap.Round(time.Millisecond))
		}
		last = time.Now()
		time.Sleep(5 * time.Millisecond)
	}
	fmt.Println("EXPELLED")
	<-m.Ctx().Done()
	return nil
}

// A member frozen (SIGSTOP) past its TTL is gone from the list,
// and when it resumes it learns it was expelled before acting again.
func TestFrozenMemberExpelled(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		p := dbtest.Spawn(t, "stopper", "DSN="+env.DSN, "ID=frozen")
		p.WaitLine(t, "JOINED", 30*time.Second)
		// Freeze it inside its loop's sleep, not in the microseconds after
		// JOINED between its check of Valid and its act (a check-then-act
		// window no API can close: CI froze it there once).
		time.Sleep(100 * time.Millisecond)
		p.Signal(syscall.SIGSTOP)
		stopped := time.Now()
		deadline := stopped.Add(5 * time.Second)
		for {
			ms, err := membership.Members(ctx, env.DB, "workers")
			if err != nil {
				t.Fatal(err)
			}
			if len(ms) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("frozen member still listed %v after SIGSTOP", time.Since(stopped))
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Logf("frozen member gone %v after SIGSTOP (TTL 600ms)", time.Since(stopped).Round(10*time.Millisecond))
		// Lines printed before the freeze are in the pipe by now: a gap
		// there was a stall of a live member (its heartbeats went on), not
		// the freeze under test.
		for drained := false; !drained; {
			select {
			case l := <-p.Lines:
				t.Logf("printed before the freeze: %q", l)
			case <-time.After(250 * time.Millisecond): // and a freeze well past the TTL
				drained = true
			}
		}
		p.Signal(syscall.SIGCONT)
		if line := p.WaitLine(t, "", 5*time.Second); line != "EXPELLED" {
			t.Fatalf("resumed member: %q, want it to see itself expelled before acting", line)
		}
		ms, _ := membership.Members(ctx, env.DB, "workers")
		if len(ms) != 0 {
			t.Fatalf("expelled member listed again after resuming: %v", ids(ms))
		}
	})
}

// On PostgreSQL Watch hears joins and leaves through NOTIFY,
// well before its (long) polling interval.
func TestWatchNotify(t *testing.T) {
	t.Parallel()
	env := dbtest.New(t, "postgres")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := membership.Watch(ctx, env.DB, "notified", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	<-ch                               // the first list
	time.Sleep(500 * time.Millisecond) // LISTEN (and its probe) in place
	start := time.Now()
	m, err := membership.Join(ctx, env.DB, "notified", membership.Options{ID: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-ch:
		if fmt.Sprint(ids(got)) != "[n1]" {
			t.Fatalf("after join: %v", ids(got))
		}
		t.Logf("join seen after %v (polling every minute)", time.Since(start).Round(time.Millisecond))
	case <-time.After(10 * time.Second):
		t.Fatal("join not seen within 10s: no NOTIFY wake-up")
	}
	m.Leave(ctx)
	select {
	case got := <-ch:
		if len(got) != 0 {
			t.Fatalf("after leave: %v", ids(got))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("leave not seen within 10s")
	}
}
