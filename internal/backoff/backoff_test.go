package backoff

import (
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
