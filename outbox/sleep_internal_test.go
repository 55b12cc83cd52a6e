package outbox

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord/internal/dbtest"
)

// A message committed after the relay's last empty poll but before it
// holds the sleep lock sends no NOTIFY (no relay sleeps yet): the relay
// polls once more after taking the lock and publishes it at once, instead
// of after its wait (seconds, after an idle spell).
func TestSleepPollsAgainUnderTheLock(t *testing.T) {
	t.Parallel()
	env := dbtest.New(t, "postgres")
	ctx := context.Background()
	got := make(chan time.Time, 10)
	r, err := NewRelay(env.DB, PublisherFunc(func(context.Context, Message) error { got <- time.Now(); return nil }),
		RelayOptions{Listen: ListenOn, PollMax: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var armed atomic.Bool
	window, resume := make(chan struct{}), make(chan struct{})
	r.beforeSleep = func() {
		if armed.CompareAndSwap(true, false) {
			close(window)
			<-resume
		}
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); r.Run(rctx) }()
	defer func() { stop(); <-done }()
	time.Sleep(3 * time.Second) // idle: the relay's wait has grown to seconds
	armed.Store(true)
	select {
	case <-window:
	case <-time.After(40 * time.Second):
		t.Fatal("the relay never went to sleep again")
	}
	if err := New(env.DB).EnqueueNow(ctx, Msg{Topic: "t", Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	committed := time.Now()
	close(resume)
	select {
	case at := <-got:
		t.Logf("published %v after its commit", at.Sub(committed).Round(time.Millisecond))
		if at.Sub(committed) > time.Second {
			t.Fatalf("published %v after its commit: the relay slept on a message it had not seen", at.Sub(committed))
		}
	case <-time.After(40 * time.Second):
		t.Fatal("never published")
	}
}

// A producer whose transaction is open when the relay wants to sleep
// holds the sleep lock shared: the relay gives up after 50 ms, and since
// no other relay sleeps, tries again soon rather than after its long wait;
// the message is published soon after the producer commits.
func TestSleepRetriesSoonBehindAnOpenProducer(t *testing.T) {
	t.Parallel()
	env := dbtest.New(t, "postgres")
	ctx := context.Background()
	got := make(chan time.Time, 10)
	r, err := NewRelay(env.DB, PublisherFunc(func(context.Context, Message) error { got <- time.Now(); return nil }),
		RelayOptions{Listen: ListenOn, PollMax: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var armed atomic.Bool
	window, resume := make(chan struct{}), make(chan struct{})
	r.beforeSleep = func() {
		if armed.CompareAndSwap(true, false) {
			close(window)
			<-resume
		}
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); r.Run(rctx) }()
	defer func() { stop(); <-done }()
	time.Sleep(3 * time.Second)
	armed.Store(true)
	select {
	case <-window:
	case <-time.After(40 * time.Second):
		t.Fatal("the relay never went to sleep again")
	}
	tx, err := env.DB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := New(env.DB).Enqueue(ctx, tx, Msg{Topic: "t", Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	close(resume)
	time.Sleep(300 * time.Millisecond) // the relay's lock waits 50 ms, in vain
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	committed := time.Now()
	select {
	case at := <-got:
		t.Logf("published %v after its commit", at.Sub(committed).Round(time.Millisecond))
		if at.Sub(committed) > time.Second {
			t.Fatalf("published %v after its commit", at.Sub(committed))
		}
	case <-time.After(40 * time.Second):
		t.Fatal("never published")
	}
}
