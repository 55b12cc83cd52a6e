package outbox_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord/dialects"
	"github.com/sqlcoord/sqlcoord/membership"
	"github.com/sqlcoord/sqlcoord/outbox"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

// A NOTIFY serialises the commits of every notifying
// transaction, so Enqueue sends it only while a listening relay sleeps
// (holds the sleep lock, after its polls found nothing); a listening relay
// is also a member of dialects.OutboxListeners (for operators).
func TestEnqueueNotifiesOnlyWhileARelayListens(t *testing.T) {
	t.Parallel()
	env := dbtest.New(t, "postgres")
	ctx := context.Background()
	ob := outbox.New(env.DB)
	got := countNotifications(t, env)
	time.Sleep(300 * time.Millisecond) // LISTEN in place
	enqueueAndWait := func() int64 {
		before := got.Load()
		if err := ob.EnqueueNow(ctx, outbox.Msg{Topic: "t", Payload: []byte("x")}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
		return got.Load() - before
	}
	t.Run("no relay listening: no NOTIFY", func(t *testing.T) {
		if n := enqueueAndWait(); n != 0 {
			t.Fatalf("%d notifications with no listening relay", n)
		}
	})
	t.Run("a listening relay registers and sleeps; then Enqueue notifies", func(t *testing.T) {
		r, err := outbox.NewRelay(env.DB, outbox.PublisherFunc(func(context.Context, outbox.Message) error { return nil }),
			outbox.RelayOptions{Listen: outbox.ListenOn, PollMax: time.Hour, PollMin: time.Hour, PollBusy: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		rctx, rstop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); r.Run(rctx) }()
		deadline := time.Now().Add(10 * time.Second)
		for {
			ms, err := membership.Members(ctx, env.DB, dialects.OutboxListeners)
			if err != nil {
				t.Fatal(err)
			}
			if len(ms) == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("listening relay not registered: %v", ms)
			}
			time.Sleep(50 * time.Millisecond)
		}
		// asleep: the relay holds its sleep lock (LISTEN in effect, polls empty)
		for dbtest.Count(t, env.DB, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND mode = 'ExclusiveLock'
  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`) == 0 {
			if time.Now().After(deadline) {
				t.Fatal("the listening relay never fell asleep")
			}
			time.Sleep(20 * time.Millisecond)
		}
		if n := enqueueAndWait(); n < 1 {
			t.Fatalf("no notification while a relay listens")
		}
		rstop()
		<-done
		ms, _ := membership.Members(ctx, env.DB, dialects.OutboxListeners)
		if len(ms) != 0 {
			t.Fatalf("a stopped relay stays registered: %v", ms)
		}
		if n := enqueueAndWait(); n != 0 {
			t.Fatalf("%d notifications after the relay stopped", n)
		}
	})
}

// A relay that sleeps until a NOTIFY is woken by every message committed
// after its polls found nothing, whoever commits when: producers enqueue
// one message at a time with random pauses (so the relay falls asleep and
// wakes all the time) from 8 goroutines, and each message's commit →
// delivery time is far below PollMax (10 s here: a message whose producer
// did not notify while the relay went to sleep would wait that long).
func TestSleepingRelayMissesNoWakeUp(t *testing.T) {
	t.Parallel()
	env := dbtest.New(t, "postgres")
	ctx := context.Background()
	ob := outbox.New(env.DB)
	var mu sync.Mutex
	var worst time.Duration
	delivered := map[string]bool{}
	startRelay(t, env.DB, outbox.PublisherFunc(func(_ context.Context, m outbox.Message) error {
		mu.Lock()
		defer mu.Unlock()
		if d := time.Since(m.CreatedAt); d > worst {
			worst = d
		}
		delivered[m.UUID] = true
		return nil
	}), outbox.RelayOptions{Listen: outbox.ListenOn, PollMin: 20 * time.Millisecond, PollMax: 10 * time.Second})
	time.Sleep(300 * time.Millisecond)
	var wg sync.WaitGroup
	const per = 40
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; i++ {
				time.Sleep(time.Duration(rand.IntN(120)) * time.Millisecond)
				if err := ob.EnqueueNow(ctx, outbox.Msg{Topic: "t", Payload: []byte("x")}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	deadline := time.Now().Add(15 * time.Second)
	for {
		mu.Lock()
		n := len(delivered)
		mu.Unlock()
		if n == 8*per || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d messages, worst commit → delivery %v (PollMax 10 s)", len(delivered), worst)
	if len(delivered) != 8*per || worst > 3*time.Second {
		t.Fatalf("delivered %d of %d, worst commit → delivery %v: a wake-up was lost", len(delivered), 8*per, worst)
	}
}

// While messages trickle in (slower than SleepBelow) the relay
// sleeps right after each batch, so the next message is delivered on its
// commit's NOTIFY, not at the next poll: with PollBusy and PollMin at 10 s,
// a relay that waited for its next poll after a batch would deliver the
// message after a batch almost a poll (10 s) late. The bound is half a
// poll: a loaded machine delivered one on its NOTIFY 2 s late.
func TestTrickleDeliveredOnCommit(t *testing.T) {
	t.Parallel()
	const poll = 10 * time.Second
	env := dbtest.New(t, "postgres")
	ctx := context.Background()
	got := make(chan time.Time, 100)
	startRelay(t, env.DB, outbox.PublisherFunc(func(context.Context, outbox.Message) error {
		got <- time.Now()
		return nil
	}), outbox.RelayOptions{Listen: outbox.ListenOn, PollBusy: poll, PollMin: poll, PollMax: 2 * poll})
	ob := outbox.New(env.DB)
	// the first message may find the relay awake (LISTEN not yet proven)
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; ; i++ {
		if err := ob.EnqueueNow(ctx, outbox.Msg{Topic: "t", Payload: []byte("x")}); err != nil {
			t.Fatal(err)
		}
		committed := time.Now()
		at := <-got
		if at.Sub(committed) < time.Second || time.Now().After(deadline) {
			break
		}
	}
	var worst time.Duration
	for i := 0; i < 10; i++ {
		time.Sleep(100 * time.Millisecond)
		if err := ob.EnqueueNow(ctx, outbox.Msg{Topic: "t", Payload: []byte("x")}); err != nil {
			t.Fatal(err)
		}
		committed := time.Now()
		select {
		case at := <-got:
			worst = max(worst, at.Sub(committed))
		case <-time.After(20 * time.Second):
			t.Fatal("never published")
		}
	}
	t.Logf("10 messages 100 ms apart: worst commit → delivery %v (PollBusy %v)", worst, poll)
	if worst > poll/2 {
		t.Fatalf("worst commit → delivery %v: the relay waited for its next poll instead of sleeping after its batch", worst)
	}
}

// Above SleepBelow the relay stays awake and producers send no
// NOTIFY (a NOTIFY serialises notifying commits): 8 producers enqueue as
// fast as they can for 2 s beside a listening relay; the notifications
// sent (a watcher listens too) stay a small fraction of the messages —
// a relay that slept after every batch drew one for most of them.
func TestBusyRelayDrawsFewNotifications(t *testing.T) {
	t.Parallel()
	env := dbtest.New(t, "postgres")
	ctx := context.Background()
	notes := countNotifications(t, env)
	// SleepBelow 100/s: the producers run at several times that even on a
	// loaded machine (else the test skips), so the rate estimate stays far
	// above it
	startRelay(t, env.DB, outbox.PublisherFunc(func(context.Context, outbox.Message) error { return nil }),
		outbox.RelayOptions{Listen: outbox.ListenOn, SleepBelow: 100})
	time.Sleep(time.Second) // listening, asleep
	ob := outbox.New(env.DB)
	var sent atomic.Int64
	pctx, pstop := context.WithTimeout(ctx, 2*time.Second)
	defer pstop()
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for pctx.Err() == nil {
				if err := ob.EnqueueNow(pctx, outbox.Msg{Topic: "t", Payload: []byte("x")}); err == nil {
					sent.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	time.Sleep(300 * time.Millisecond) // the last notifications arrive
	n, s := notes.Load(), sent.Load()
	t.Logf("%d messages, %d notifications", s, n)
	if s < 600 {
		t.Skipf("only %d messages in 2 s: too slow a machine to stay well above SleepBelow", s)
	}
	if n*10 > s {
		t.Fatalf("%d notifications for %d messages: producers paid for a NOTIFY while the relay was busy", n, s)
	}
}

// A woken relay lets go of its sleep lock as soon as its claim
// returns messages, not when the batch commits, so a slow publish does not
// make producers notify: while the relay publishes one message for 3 s,
// 20 producers' commits send no NOTIFY (a relay that kept the lock
// through the batch drew one for each).
func TestSlowPublishDrawsNoNotifications(t *testing.T) {
	t.Parallel()
	env := dbtest.New(t, "postgres")
	ctx := context.Background()
	notes := countNotifications(t, env)
	publishing := make(chan struct{}, 1)
	startRelay(t, env.DB, outbox.PublisherFunc(func(_ context.Context, m outbox.Message) error {
		if m.Topic == "slow" {
			publishing <- struct{}{}
			time.Sleep(3 * time.Second)
		}
		return nil
	}), outbox.RelayOptions{Listen: outbox.ListenOn, PublishTimeout: 10 * time.Second})
	ob := outbox.New(env.DB)
	// asleep: a trickle of messages, each delivered on its NOTIFY
	time.Sleep(time.Second)
	if err := ob.EnqueueNow(ctx, outbox.Msg{Topic: "slow", Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-publishing:
	case <-time.After(20 * time.Second):
		t.Fatal("the slow message was never published")
	}
	time.Sleep(200 * time.Millisecond) // its NOTIFY has arrived
	before := notes.Load()
	for i := 0; i < 20; i++ {
		if err := ob.EnqueueNow(ctx, outbox.Msg{Topic: "t", Payload: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(200 * time.Millisecond)
	if n := notes.Load() - before; n > 1 {
		t.Fatalf("%d notifications for 20 messages committed while the relay published: it held the sleep lock through its batch", n)
	}
}
