package coord_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/coord"
	"github.com/sqlcoord/sqlcoord/metrics"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

// An election's API on both dialects — campaign, leader value,
// resign hands over with a larger term, a deposed leader's fenced write is
// refused by the row, observers see every term in order.
func TestElection(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		c := coord.New(env.DB)
		elect := func(t *testing.T, name, id string, ttl time.Duration) *coord.Election[*sql.Tx] {
			t.Helper()
			e, err := c.Election(name, coord.ElectionOptions{ID: id, TTL: ttl})
			if err != nil {
				t.Fatal(err)
			}
			return e
		}

		t.Run("no leader before the first campaign", func(t *testing.T) {
			_, err := elect(t, "none-yet", "a", time.Second).Leader(ctx)
			if !errors.Is(err, coord.ErrNoLeader) {
				t.Fatalf("Leader: %v, want ErrNoLeader", err)
			}
		})

		t.Run("campaign, proclaim, resign hands over with a larger term", func(t *testing.T) {
			a, b := elect(t, "handover", "a", 5*time.Second), elect(t, "handover", "b", 5*time.Second)
			la, err := a.Campaign(ctx, "10.0.0.1:80")
			if err != nil {
				t.Fatal(err)
			}
			got, err := b.Leader(ctx)
			if err != nil || got.ID != "a" || got.Value != "10.0.0.1:80" || got.Term != la.Term() || !got.Live {
				t.Fatalf("follower reads %+v, %v", got, err)
			}
			if err := la.Proclaim(ctx, "10.0.0.1:81"); err != nil {
				t.Fatal(err)
			}
			if got, _ := b.Leader(ctx); got.Value != "10.0.0.1:81" {
				t.Fatalf("after Proclaim the follower reads %q", got.Value)
			}
			won := make(chan *coord.Leadership, 1)
			go func() {
				lb, err := b.Campaign(ctx, "b")
				if err != nil {
					t.Error(err)
				}
				won <- lb
			}()
			select {
			case <-won:
				t.Fatal("b elected while a leads")
			case <-time.After(300 * time.Millisecond):
			}
			start := time.Now()
			if err := la.Resign(ctx); err != nil {
				t.Fatal(err)
			}
			lb := <-won
			if lb == nil {
				return
			}
			t.Logf("handover after resign: %v", time.Since(start).Round(time.Millisecond))
			if lb.Term() <= la.Term() {
				t.Fatalf("new term %d not above %d", lb.Term(), la.Term())
			}
			if la.Context().Err() == nil {
				t.Fatal("resigned leadership's context still live")
			}
			if err := la.Proclaim(ctx, "still me"); !errors.Is(err, coord.ErrNotLeader) {
				t.Fatalf("Proclaim by a resigned leader: %v, want ErrNotLeader", err)
			}
			if err := la.Resign(ctx); !errors.Is(err, coord.ErrNotLeader) || !errors.Is(err, coord.ErrLeaseLost) {
				t.Fatalf("second Resign: %v, want ErrNotLeader", err)
			}
			if got, _ := a.Leader(ctx); got.ID != "b" || got.Value != "b" {
				t.Fatalf("leader after handover: %+v", got)
			}
			lb.Resign(ctx)
		})

		t.Run("a deposed leader's fenced write is refused", func(t *testing.T) {
			a, b := elect(t, "fenced", "a", 5*time.Second), elect(t, "fenced", "b", 5*time.Second)
			la, err := a.Campaign(ctx, "")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := a.Depose(ctx); err != nil { // an operator deposes a: a does not know yet
				t.Fatal(err)
			}
			lb, err := b.Campaign(ctx, "")
			if err != nil {
				t.Fatal(err)
			}
			defer lb.Resign(ctx)
			fenced := func(term int64) error {
				tx, err := env.DB.BeginTx(ctx, nil)
				if err != nil {
					return err
				}
				defer tx.Rollback()
				if err := c.Fence(ctx, tx, "fenced-resource", term); err != nil {
					return err
				}
				return tx.Commit()
			}
			if err := fenced(lb.Term()); err != nil {
				t.Fatal(err)
			}
			if err := fenced(la.Term()); !errors.Is(err, coord.ErrStaleToken) {
				t.Fatalf("the deposed leader's write: %v, want ErrStaleToken", err)
			}
			select {
			case <-la.Context().Done():
			case <-time.After(5 * time.Second):
				t.Fatal("the deposed leader's context did not end at its next renewal")
			}
			if !errors.Is(context.Cause(la.Context()), coord.ErrLeaseLost) {
				t.Fatalf("cause %v, want ErrLeaseLost", context.Cause(la.Context()))
			}
		})

		t.Run("the leadership ends with the campaign's context", func(t *testing.T) {
			a, b := elect(t, "cancel", "a", 5*time.Second), elect(t, "cancel", "b", 5*time.Second)
			actx, cancel := context.WithCancel(ctx)
			la, err := a.Campaign(actx, "")
			if err != nil {
				t.Fatal(err)
			}
			cancel()
			<-la.Done()
			start := time.Now()
			lb, err := b.Campaign(ctx, "")
			if err != nil {
				t.Fatal(err)
			}
			defer lb.Resign(ctx)
			if d := time.Since(start); d > 2*time.Second {
				t.Fatalf("next leader after %v: the cancelled leader did not resign", d)
			}
		})

		t.Run("observers see every term in order", func(t *testing.T) {
			ectx, stop := context.WithCancel(ctx)
			defer stop()
			obs := elect(t, "observed", "watcher", time.Second)
			ch, err := obs.Observe(ectx)
			if err != nil {
				t.Fatal(err)
			}
			var terms []int64
			for i := 0; i < 5; i++ {
				l, err := elect(t, "observed", "", 5*time.Second).Campaign(ctx, "v")
				if err != nil {
					t.Fatal(err)
				}
				if i == 4 {
					if err := l.Proclaim(ctx, "changed"); err != nil {
						t.Fatal(err)
					}
				}
				terms = append(terms, l.Term())
				if err := l.Resign(ctx); err != nil {
					t.Fatal(err)
				}
			}
			seen := map[int64]bool{}
			var last int64
			sawChanged, sawEnded := false, false
			deadline := time.After(10 * time.Second)
			for !(len(seen) == len(terms) && sawChanged && sawEnded) {
				select {
				case l := <-ch:
					if l.Term < last {
						t.Fatalf("term %d after %d", l.Term, last)
					}
					last = l.Term
					seen[l.Term] = true
					sawChanged = sawChanged || (l.Term == terms[4] && l.Value == "changed")
					sawEnded = sawEnded || (l.Term == terms[4] && !l.Live)
				case <-deadline:
					t.Fatalf("observed %v, want terms %v, the last one's new value (%v) and its end (%v)", seen, terms, sawChanged, sawEnded)
				}
			}
			for _, term := range terms[1:] {
				if !seen[term] {
					t.Fatalf("term %d not observed (saw %v)", term, seen)
				}
			}
		})

		t.Run("an observer learns of a new leader promptly", func(t *testing.T) {
			ectx, stop := context.WithTimeout(ctx, 10*time.Second)
			defer stop()
			obs := elect(t, "prompt", "watcher", time.Second)
			ch, err := obs.Observe(ectx)
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(200 * time.Millisecond) // the observer is listening (or polling)
			start := time.Now()
			l, err := elect(t, "prompt", "", 5*time.Second).Campaign(ctx, "")
			if err != nil {
				t.Fatal(err)
			}
			defer l.Resign(ctx)
			for got := range ch {
				if got.Term == l.Term() && got.Live {
					t.Logf("observer saw term %d %v after the campaign started", got.Term, time.Since(start).Round(time.Millisecond))
					return
				}
			}
			t.Fatal("the observer never saw the new leader")
		})

		t.Run("an observer whose notifications are lost still sees the new leader", func(t *testing.T) {
			// Its client believes it listens (a probe a pooler fooled, a
			// listener between reconnects) and hears nothing: with no live
			// leader it waited a minute for a NOTIFY (the conformance
			// suite through PgBouncer failed on it); it reads again within
			// one TTL.
			ectx, stop := context.WithTimeout(ctx, 15*time.Second)
			defer stop()
			obs, err := coord.New[*sql.Tx](deafDriver{env.DB}).Election("deaf", coord.ElectionOptions{ID: "watcher", TTL: 2 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			ch, err := obs.Observe(ectx)
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(300 * time.Millisecond) // its first read found no leader
			l, err := elect(t, "deaf", "", 5*time.Second).Campaign(ctx, "")
			if err != nil {
				t.Fatal(err)
			}
			defer l.Resign(ctx)
			start := time.Now()
			for got := range ch {
				if got.Term == l.Term() && got.Live {
					t.Logf("deaf observer saw term %d after %v", got.Term, time.Since(start).Round(time.Millisecond))
					return
				}
			}
			t.Fatal("the deaf observer never saw the new leader within 15 s")
		})

		t.Run("pruning keeps recent terms", func(t *testing.T) {
			l, err := elect(t, "pruned", "a", 5*time.Second).Campaign(ctx, "kept")
			if err != nil {
				t.Fatal(err)
			}
			defer l.Resign(ctx)
			// a term far above (as after a failover's epoch jump): the
			// prune statement runs and deletes nothing an hour young
			if _, err := env.DB.Executor().Exec(ctx, env.DB.Dialect().Q().ElectionPrune, "pruned", l.Term()+1_000_000); err != nil {
				t.Fatal(err)
			}
			if got, err := elect(t, "pruned", "b", time.Second).Leader(ctx); err != nil || got.Term != l.Term() || got.Value != "kept" {
				t.Fatalf("after a prune: %+v %v", got, err)
			}
		})

		t.Run("metrics see each leadership start and end", func(t *testing.T) {
			rec := &leaderRecorder{}
			mc := coord.New(env.Open(t, sqlcoord.Options{Metrics: rec}))
			e, err := mc.Election("metered", coord.ElectionOptions{TTL: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			l, err := e.Campaign(ctx, "")
			if err != nil {
				t.Fatal(err)
			}
			l.Resign(ctx)
			<-l.Done()
			deadline := time.Now().Add(5 * time.Second)
			for rec.String() != "metered:1:true metered:1:false" && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if got := rec.String(); got != "metered:1:true metered:1:false" {
				t.Fatalf("recorded %q", got)
			}
		})

		t.Run("Run leads, campaigns again, and resigns when its context ends", func(t *testing.T) {
			rctx, stop := context.WithCancel(ctx)
			var mu sync.Mutex
			var started, stopped []int64
			var leaders []coord.Leader
			e := elect(t, "callbacks", "runner", 2*time.Second)
			done := make(chan error, 1)
			go func() {
				done <- e.Run(rctx, "me", coord.LeaderCallbacks{
					OnStartedLeading: func(ctx context.Context, l *coord.Leadership) {
						mu.Lock()
						started = append(started, l.Term())
						n := len(started)
						mu.Unlock()
						if n == 1 {
							return // the work ends: resign and campaign again
						}
						<-ctx.Done()
					},
					OnStoppedLeading: func(term int64) { mu.Lock(); stopped = append(stopped, term); mu.Unlock() },
					OnNewLeader:      func(l coord.Leader) { mu.Lock(); leaders = append(leaders, l); mu.Unlock() },
				})
			}()
			deadline := time.Now().Add(10 * time.Second)
			for {
				mu.Lock()
				n, o := len(started), len(leaders)
				mu.Unlock()
				if n >= 2 && o >= 1 || time.Now().After(deadline) {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			stop()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Fatalf("Run returned %v", err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(started) != 2 || len(stopped) != 2 || started[1] <= started[0] {
				t.Fatalf("started %v stopped %v", started, stopped)
			}
			if _, err := e.Leader(ctx); !errors.Is(err, coord.ErrNoLeader) {
				t.Fatalf("after Run returned: %v, want no leader", err)
			}
			if len(leaders) == 0 || leaders[0].Value != "me" {
				t.Fatalf("OnNewLeader saw %+v", leaders)
			}
		})
	})
}

// Bad input gets a typed error and changes nothing.
func TestElectionAndSemaphoreBadInput(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, env *dbtest.Env) {
		ctx := context.Background()
		c := coord.New(env.DB)
		for _, tc := range []struct {
			name string
			err  error
			call func() error
		}{
			{"empty election name", coord.ErrInvalidName, func() error { _, err := c.Election("", coord.ElectionOptions{}); return err }},
			{"election name over 246 bytes", coord.ErrInvalidName, func() error { _, err := c.Election(strings.Repeat("e", 247), coord.ElectionOptions{}); return err }},
			{"election name not UTF-8", coord.ErrInvalidName, func() error { _, err := c.Election("bad\xff", coord.ElectionOptions{}); return err }},
			{"negative TTL", coord.ErrInvalidTTL, func() error { _, err := c.Election("e", coord.ElectionOptions{TTL: -time.Second}); return err }},
			{"TTL over a year", coord.ErrInvalidTTL, func() error { _, err := c.Election("e", coord.ElectionOptions{TTL: 400 * 24 * time.Hour}); return err }},
			{"candidate id with NUL", coord.ErrInvalidName, func() error { _, err := c.Election("e", coord.ElectionOptions{ID: "a\x00"}); return err }},
			{"value not UTF-8", coord.ErrInvalidValue, func() error {
				e, _ := c.Election("e", coord.ElectionOptions{})
				_, err := e.Campaign(ctx, "\xc3")
				return err
			}},
			{"value too long", coord.ErrInvalidValue, func() error {
				e, _ := c.Election("e", coord.ElectionOptions{})
				_, err := e.Campaign(ctx, strings.Repeat("v", coord.MaxValueLen+1))
				return err
			}},
			{"zero permits", coord.ErrInvalidPermits, func() error { _, err := c.Semaphore("s", 0); return err }},
			{"negative permits", coord.ErrInvalidPermits, func() error { _, err := c.Semaphore("s", -3); return err }},
			{"too many permits", coord.ErrInvalidPermits, func() error { _, err := c.Semaphore("s", coord.MaxPermits+1); return err }},
			{"semaphore name over 240 bytes", coord.ErrInvalidName, func() error { _, err := c.Semaphore(strings.Repeat("s", 241), 1); return err }},
			{"semaphore name with trailing NUL", coord.ErrInvalidName, func() error { _, err := c.Semaphore("s\x00", 1); return err }},
			{"SetPermits to zero", coord.ErrInvalidPermits, func() error {
				s, _ := c.Semaphore("s", 1)
				return s.SetPermits(ctx, 0)
			}},
			{"negative permit TTL", coord.ErrInvalidTTL, func() error {
				s, _ := c.Semaphore("s", 1)
				_, err := s.TryAcquire(ctx, "", -time.Second)
				return err
			}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				if err := tc.call(); !errors.Is(err, tc.err) {
					t.Fatalf("got %v, want %v", err, tc.err)
				}
			})
		}
		t.Run("nothing was written", func(t *testing.T) {
			if n := dbtest.Count(t, env.DB, `SELECT count(*) FROM coord_election_terms`); n != 0 {
				t.Fatalf("%d terms recorded", n)
			}
			if n := dbtest.Count(t, env.DB, `SELECT count(*) FROM coord_semaphores`); n != 0 {
				t.Fatalf("%d semaphores recorded", n)
			}
		})
		t.Run("names are bytes: a trailing space is another election", func(t *testing.T) {
			a, _ := c.Election("space", coord.ElectionOptions{ID: "a"})
			b, _ := c.Election("space ", coord.ElectionOptions{ID: "b"})
			la, err := a.Campaign(ctx, "")
			if err != nil {
				t.Fatal(err)
			}
			defer la.Resign(ctx)
			cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			lb, err := b.Campaign(cctx, "")
			if err != nil {
				t.Fatalf("'space ' is blocked by 'space': %v", err)
			}
			lb.Resign(ctx)
		})
		t.Run("without the schema", func(t *testing.T) {
			bare := dbtest.New(t, env.Family, dbtest.NoMigrate())
			cb := coord.New(bare.DB)
			e, _ := cb.Election("e", coord.ElectionOptions{})
			if _, err := e.Leader(ctx); !errors.Is(err, sqlcoord.ErrNoSchema) {
				t.Fatalf("Leader: %v, want ErrNoSchema", err)
			}
			s, _ := cb.Semaphore("s", 1)
			if _, err := s.TryAcquire(ctx, "", time.Second); !errors.Is(err, sqlcoord.ErrNoSchema) {
				t.Fatalf("TryAcquire: %v, want ErrNoSchema", err)
			}
		})
	})
}

// leaderRecorder records Leadership calls.
type leaderRecorder struct {
	metrics.Nop
	mu     sync.Mutex
	events []string
}

func (r *leaderRecorder) Leadership(election string, term int64, leading bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, fmt.Sprintf("%s:%d:%v", election, term, leading))
}

func (r *leaderRecorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.events, " ")
}

// deafDriver is a driver whose listener says it listens and never hears a
// notification.
type deafDriver struct{ *sqlcoord.DB }

func (deafDriver) CanListen() error { return nil }

func (deafDriver) Listen(ctx context.Context, _ string, opt sqlcoord.ListenOptions, _ func()) error {
	if opt.Ready != nil {
		opt.Ready()
	}
	<-ctx.Done()
	return nil
}
