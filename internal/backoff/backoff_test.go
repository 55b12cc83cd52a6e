package backoff

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestDelay(t *testing.T) {
	t.Parallel()
	p := Policy{Base: 10 * time.Millisecond, Max: time.Second}
	for n, want := range []time.Duration{10, 20, 40, 80, 160, 320, 640, 1000, 1000} {
		if got := p.Delay(n); got != want*time.Millisecond && !(want == 1000 && got == time.Second) {
			t.Errorf("Delay(%d) = %v, want %vms", n, got, want)
		}
	}
	if got := p.Delay(1000); got != time.Second {
		t.Errorf("Delay(1000) = %v, want the cap", got)
	}
	if got := (Policy{}).Delay(3); got != 0 {
		t.Errorf("zero policy: %v", got)
	}
	for i := 0; i < 1000; i++ {
		if d := (Policy{Base: time.Second, Max: time.Minute, Jitter: Full}).Delay(2); d < 0 || d > 4*time.Second {
			t.Fatalf("full jitter out of [0, 4s]: %v", d)
		}
		if d := (Policy{Base: time.Second, Max: time.Minute, Jitter: Equal}).Delay(2); d < 2*time.Second || d > 4*time.Second {
			t.Fatalf("equal jitter out of [2s, 4s]: %v", d)
		}
	}
}

func TestRetry(t *testing.T) {
	t.Parallel()
	busy, other := errors.New("busy"), errors.New("other")
	isBusy := func(err error) bool { return errors.Is(err, busy) }
	p := Policy{Base: time.Microsecond}
	run := func(ctx context.Context, tries int, results ...error) (int, error) {
		n := 0
		err := p.Retry(ctx, tries, isBusy, func() error {
			n++
			return results[min(n, len(results))-1]
		})
		return n, err
	}
	t.Run("stops at success", func(t *testing.T) {
		if n, err := run(context.Background(), 5, busy, busy, nil); n != 3 || err != nil {
			t.Errorf("%d calls, %v", n, err)
		}
	})
	t.Run("stops at an error not retryable", func(t *testing.T) {
		if n, err := run(context.Background(), 5, busy, other); n != 2 || err != other {
			t.Errorf("%d calls, %v", n, err)
		}
	})
	t.Run("gives up after tries with the last error", func(t *testing.T) {
		if n, err := run(context.Background(), 4, busy); n != 4 || err != busy {
			t.Errorf("%d calls, %v", n, err)
		}
	})
	t.Run("a context that ended stops the sleep", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if n, err := run(ctx, 5, busy); n != 1 || !errors.Is(err, context.Canceled) {
			t.Errorf("%d calls, %v", n, err)
		}
	})
}
