package sqlcoordtest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord/membership"
	"github.com/sqlcoord/sqlcoord/outbox"
	"github.com/sqlcoord/sqlcoord/outbox/pgstream"
	"github.com/sqlcoord/sqlcoord/saga"
	"github.com/sqlcoord/sqlcoord/session"
	"github.com/sqlcoord/sqlcoord/txn"
)

// sagaRuns: a saga begun in a committed transaction runs every action; a
// saga whose second branch fails for good compensates the first; a saga
// begun in a rolled-back transaction does not exist.
func (s *suite[TTx]) sagaRuns(t *testing.T) {
	ctx := s.ctx(t)
	c, err := saga.New(s.Driver, saga.Options{Owner: s.name("saga-driver")})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var calls []string
	record := func(name string, fail bool) saga.Func {
		return func(_ context.Context, call saga.Call) error {
			mu.Lock()
			calls = append(calls, call.GID[len(call.GID)-2:]+":"+name+":"+string(call.Op))
			mu.Unlock()
			if fail && call.Op == txn.OpAction {
				return saga.Fail(errors.New("refused"))
			}
			return nil
		}
	}
	fn := s.name("saga")
	for _, r := range []struct {
		name string
		fail bool
	}{{"debit", false}, {"credit", false}, {"refuse", true}} {
		if err := c.Register(fn+"-"+r.name, record(r.name, r.fail)); err != nil {
			t.Fatal(err)
		}
	}
	begin := func(gid string, second string, rollback bool) error {
		boom := errors.New("rolled back")
		err := s.do(ctx, func(ctx context.Context, tx TTx) error {
			if _, err := c.Begin(ctx, tx, saga.Global{GID: gid, Mode: saga.ModeSaga, Branches: []saga.Branch{
				{Name: "one", Target: fn + "-debit"}, {Name: "two", Target: fn + "-" + second},
			}}); err != nil {
				return err
			}
			if rollback {
				return boom
			}
			return nil
		})
		if rollback && errors.Is(err, boom) {
			return nil
		}
		return err
	}
	ok, bad, gone := s.name("saga-ok"), s.name("saga-ab"), s.name("saga-rb")
	for _, b := range []struct {
		gid, second string
		rollback    bool
	}{{ok, "credit", false}, {bad, "refuse", false}, {gone, "credit", true}} {
		if err := begin(b.gid, b.second, b.rollback); err != nil {
			t.Fatalf("begin %s: %v", b.gid, err)
		}
	}
	for gid, want := range map[string]saga.Status{ok: saga.Succeeded, bad: saga.Aborted} {
		st, err := c.Drive(ctx, gid)
		for err == nil && !st.Ended() {
			time.Sleep(20 * time.Millisecond)
			st, err = c.Drive(ctx, gid)
		}
		if err != nil || st != want {
			t.Fatalf("drive %s: %v, %v; want %v", gid, st, err, want)
		}
	}
	if _, err := c.Get(ctx, gone); err == nil {
		t.Fatalf("a saga begun in a rolled-back transaction exists")
	}
	mu.Lock()
	got := strings.Join(calls, " ")
	mu.Unlock()
	for _, want := range []string{"ok:debit:action", "ok:credit:action", "ab:debit:action", "ab:refuse:action", "ab:debit:compensate"} {
		if !strings.Contains(got, want) {
			t.Errorf("calls %q lack %q", got, want)
		}
	}
	if strings.Contains(got, "ok:debit:compensate") || strings.Contains(got, "rb:") {
		t.Errorf("calls %q: a succeeded saga compensated, or a rolled-back one ran", got)
	}
}

// sessionsConflict: a session created in a committed transaction loads
// with its data; two saves of one loaded version are one success and one
// ErrConflict; a revoked token does not load.
func (s *suite[TTx]) sessionsConflict(t *testing.T) {
	ctx := s.ctx(t)
	st, err := session.NewStore(s.Driver, session.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var token string
	if err := s.do(ctx, func(ctx context.Context, tx TTx) error {
		var err error
		token, _, err = st.Create(ctx, tx, s.name("user"), []byte("v0"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	loaded, err := st.Load(ctx, token)
	if err != nil || string(loaded.Data) != "v0" {
		t.Fatalf("load: %q, %v", loaded.Data, err)
	}
	var results []error
	for _, data := range []string{"first", "second"} {
		sess := loaded
		sess.Data = []byte(data)
		results = append(results, s.do(ctx, func(ctx context.Context, tx TTx) error {
			_, err := st.Save(ctx, tx, sess)
			return err
		}))
	}
	if results[0] != nil || !errors.Is(results[1], session.ErrConflict) {
		t.Fatalf("two saves of one version: %v, %v; want nil, ErrConflict", results[0], results[1])
	}
	if err := st.Revoke(ctx, token); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Load(ctx, token); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("load after Revoke: %v, want ErrNotFound", err)
	}
}

// membersListed: a joined member is listed by the database until it
// leaves; its Ctx ends when it leaves.
func (s *suite[TTx]) membersListed(t *testing.T) {
	ctx := s.ctx(t)
	group := s.name("group")
	var ms []*membership.Membership
	for i := 0; i < 2; i++ {
		m, err := membership.Join(ctx, s.Driver, group, membership.Options{ID: fmt.Sprintf("m%d", i), TTL: 3 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	list := func() []string {
		got, err := membership.Members(ctx, s.Driver, group)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, m := range got {
			ids = append(ids, m.ID)
		}
		sort.Strings(ids)
		return ids
	}
	if got := strings.Join(list(), ","); got != "m0,m1" {
		t.Fatalf("members %q, want m0,m1", got)
	}
	if err := ms[0].Leave(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ms[0].Ctx().Done():
	case <-time.After(time.Second):
		t.Fatal("Ctx still open after Leave")
	}
	if got := strings.Join(list(), ","); got != "m1" {
		t.Fatalf("members after m0 left: %q, want m1", got)
	}
	if err := ms[1].Leave(ctx); err != nil {
		t.Fatal(err)
	}
}

// streamInCommitOrder (PostgreSQL, logical replication): the streaming
// relay publishes each committed message once, a rolled-back one never.
// It runs on the independent pool (a pgx stack), the producers on the
// driver under test.
func (s *suite[TTx]) streamInCommitOrder(t *testing.T) {
	ctx := s.ctx(t)
	topic := s.name("stream")
	group := "kit_" + strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, strings.ToLower(s.Tag))
	if len(group) > 32 {
		group = group[:32]
	}
	var mu sync.Mutex
	var got []string
	r, err := pgstream.New(s.Other, outbox.PublisherFunc(func(_ context.Context, m outbox.Message) error {
		mu.Lock()
		got = append(got, string(m.Payload))
		mu.Unlock()
		return nil
	}), pgstream.Options{Group: group, Topics: []string{topic}, LeaseTTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("stream relay: %v", err)
		}
		s.Other.Executor().Exec(context.Background(), `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name LIKE $1 AND NOT active`, "sqlcoord_"+group+"_%")
	}()
	ob := outbox.New(s.Driver)
	const n = 20
	boom := errors.New("rolled back")
	for i := 0; i < n; i++ {
		i := i
		err := s.do(ctx, func(ctx context.Context, tx TTx) error {
			if err := ob.Enqueue(ctx, tx, outbox.Msg{Topic: topic, Payload: []byte(fmt.Sprint(i))}); err != nil {
				return err
			}
			if i%5 == 4 {
				return boom
			}
			return nil
		})
		if err != nil && !errors.Is(err, boom) {
			t.Fatal(err)
		}
	}
	want := n - n/5
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		k := len(got)
		mu.Unlock()
		if k >= want || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // a duplicate would show now
	mu.Lock()
	defer mu.Unlock()
	var expect []string
	for i := 0; i < n; i++ {
		if i%5 != 4 {
			expect = append(expect, fmt.Sprint(i))
		}
	}
	if strings.Join(got, ",") != strings.Join(expect, ",") {
		t.Fatalf("streamed %v, want %v (each committed message once, in commit order)", got, expect)
	}
}
