package outbox

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
)

// A message committed after the relay's last empty poll but before it
// holds the sleep lock sends no NOTIFY (no relay sleeps yet): the relay
// polls once more after taking the lock and publishes it at once, instead
// of after its wait (seconds, after an idle spell).
func TestSleepPollsAgainUnderTheLock(t *testing.T) {
	t.Parallel()
	env, got, resume := sleepyRelay(t)
	if err := New(env.DB).EnqueueNow(context.Background(), Msg{Topic: "t", Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	committed := time.Now()
	close(resume)
	publishedSoon(t, got, committed)
}

// A producer whose transaction is open when the relay wants to sleep
// holds the sleep lock shared: the relay gives up after 50 ms, and since
// no other relay sleeps, tries again soon rather than after its long wait;
// the message is published soon after the producer commits.
func TestSleepRetriesSoonBehindAnOpenProducer(t *testing.T) {
	t.Parallel()
	env, got, resume := sleepyRelay(t)
	ctx := context.Background()
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
	publishedSoon(t, got, time.Now())
}

// sleepyRelay runs a listening relay on a fresh PostgreSQL database, lets
// it idle for 3 s (its wait grows to seconds), and returns once it is
// about to take the sleep lock again, held there until resume is closed.
// Publishes are timed on got.
func sleepyRelay(t *testing.T) (env *dbtest.Env, got <-chan time.Time, resume chan<- struct{}) {
	t.Helper()
	env = dbtest.New(t, "postgres")
	published := make(chan time.Time, 10)
	r, err := NewRelay(env.DB, PublisherFunc(func(context.Context, Message) error { published <- time.Now(); return nil }),
		RelayOptions{Listen: ListenOn, PollMax: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	r.sleepLife = time.Second // it sleeps anew every few seconds
	var armed atomic.Bool
	window, res := make(chan struct{}), make(chan struct{})
	r.beforeSleep = func() {
		if armed.CompareAndSwap(true, false) {
			close(window)
			<-res
		}
	}
	rctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(rctx) }()
	t.Cleanup(func() {
		select {
		case <-res:
		default:
			close(res)
		}
		stop()
		<-done
	})
	time.Sleep(3 * time.Second) // idle: the relay's wait has grown to seconds
	armed.Store(true)
	select {
	case <-window:
	case <-time.After(40 * time.Second):
		t.Fatal("the relay never went to sleep again")
	}
	return env, published, res
}

// publishedSoon fails the test unless a message is published within a
// second of committed.
func publishedSoon(t *testing.T, got <-chan time.Time, committed time.Time) {
	t.Helper()
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
