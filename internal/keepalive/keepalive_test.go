package keepalive

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

var errGone = errors.New("gone")

func TestValidityCountsFromTheGrantingRequest(t *testing.T) {
	t.Parallel()
	// the lease was requested 300ms ago: a 500ms TTL (margin 50ms) leaves
	// 150ms, whatever the moment Start is called
	sent := time.Now().Add(-300 * time.Millisecond)
	l, err := Start(context.Background(), sent, Options{TTL: 500 * time.Millisecond, Margin: 50 * time.Millisecond, Interval: 100 * time.Millisecond,
		Renew: func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }}) // renewals hang
	if err != nil {
		t.Fatal(err)
	}
	defer l.Stop()
	if got := l.ValidUntil().Sub(sent); got != 450*time.Millisecond {
		t.Fatalf("valid until sent+%v, want sent+450ms", got)
	}
	<-l.Context().Done()
	ended := time.Since(sent)
	if ended > 450*time.Millisecond+50*time.Millisecond {
		t.Errorf("context ended %v after the request; the lease may have lapsed at 450ms", ended)
	}
	if !errors.Is(context.Cause(l.Context()), ErrExpired) || l.Valid() {
		t.Errorf("cause %v, valid %v", context.Cause(l.Context()), l.Valid())
	}
}

func TestRenewalExtendsFromItsSendTime(t *testing.T) {
	t.Parallel()
	var n atomic.Int64
	l, err := Start(context.Background(), time.Now(), Options{TTL: 300 * time.Millisecond, Interval: 50 * time.Millisecond,
		Renew: func(ctx context.Context) error { n.Add(1); time.Sleep(20 * time.Millisecond); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(600 * time.Millisecond)
	if !l.Valid() || n.Load() < 3 {
		t.Fatalf("valid %v after %d renewals", l.Valid(), n.Load())
	}
	// validity is bounded by the last request's send time, not its reply
	if left := time.Until(l.ValidUntil()); left > 270*time.Millisecond-20*time.Millisecond+5*time.Millisecond {
		t.Errorf("validity left %v exceeds TTL-margin counted from the send", left)
	}
	l.Stop()
	if l.Valid() || !errors.Is(context.Cause(l.Context()), context.Canceled) {
		t.Errorf("after Stop: valid %v, cause %v", l.Valid(), context.Cause(l.Context()))
	}
}

func TestLostStopsAtOnce(t *testing.T) {
	t.Parallel()
	l, err := Start(context.Background(), time.Now(), Options{TTL: time.Second, Interval: 10 * time.Millisecond,
		Renew: func(ctx context.Context) error { return errGone }, Lost: func(err error) bool { return errors.Is(err, errGone) }})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Context().Done():
	case <-time.After(500 * time.Millisecond):
		t.Fatal("a lost lease did not end the context")
	}
	if !errors.Is(context.Cause(l.Context()), errGone) {
		t.Errorf("cause %v", context.Cause(l.Context()))
	}
}

func TestOptionsChecked(t *testing.T) {
	t.Parallel()
	for _, o := range []Options{{}, {TTL: -time.Second, Renew: func(context.Context) error { return nil }},
		{TTL: time.Second, Interval: time.Second, Renew: func(context.Context) error { return nil }}} {
		if _, err := Start(context.Background(), time.Now(), o); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
}
