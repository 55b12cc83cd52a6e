package ids_test

import (
	"bytes"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sqlcoord/sqlcoord/coord/ids"
)

// The source article's experiment: 8 goroutines x 500,000 ids.
func TestSnowflakeConcurrentUnique(t *testing.T) {
	t.Parallel()
	sf, err := ids.NewSnowflake(7, 0, ids.SnowflakeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const g, n = 8, 500_000
	out := make([][]int64, g)
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < g; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := make([]int64, n)
			for j := range s {
				id, err := sf.Next()
				if err != nil {
					t.Error(err)
					return
				}
				s[j] = id
			}
			out[i] = s
		}()
	}
	wg.Wait()
	el := time.Since(start)
	all := make([]int64, 0, g*n)
	for i, s := range out {
		for j := 1; j < len(s); j++ {
			if s[j] <= s[j-1] {
				t.Fatalf("goroutine %d: id %d not above %d", i, s[j], s[j-1])
			}
		}
		all = append(all, s...)
	}
	slices.Sort(all)
	for i := 1; i < len(all); i++ {
		if all[i] == all[i-1] {
			t.Fatalf("duplicate id %d", all[i])
		}
	}
	d := ids.DefaultLayout.Decode(all[0])
	if d.Worker != 7 {
		t.Fatalf("decoded worker %d", d.Worker)
	}
	t.Logf("%d unique ids in %v", len(all), el)
}

type fakeClock struct{ ms atomic.Int64 }

func (c *fakeClock) now() time.Time {
	return ids.DefaultLayout.Epoch.Add(time.Duration(c.ms.Load()) * time.Millisecond)
}

func TestSnowflakeSequenceExhaustionWaits(t *testing.T) {
	t.Parallel()
	c := &fakeClock{}
	c.ms.Store(1000)
	sf, _ := ids.NewSnowflake(1, 0, ids.SnowflakeOptions{Clock: c.now})
	var last int64
	for i := 0; i < 4096; i++ {
		id, err := sf.Next()
		if err != nil {
			t.Fatal(err)
		}
		d := ids.DefaultLayout.Decode(id)
		if d.Sequence != int64(i) || d.Time != c.now() {
			t.Fatalf("id %d: %+v", i, d)
		}
		last = id
	}
	got := make(chan int64)
	go func() { id, _ := sf.Next(); got <- id }()
	select {
	case id := <-got:
		t.Fatalf("4097th id in one millisecond did not wait: %d", id)
	case <-time.After(50 * time.Millisecond):
	}
	c.ms.Store(1001)
	id := <-got
	d := ids.DefaultLayout.Decode(id)
	if id <= last || d.Sequence != 0 || d.Time != c.now() {
		t.Fatalf("after the wait: %+v", d)
	}
}

func TestSnowflakeClockRollback(t *testing.T) {
	t.Parallel()
	c := &fakeClock{}
	c.ms.Store(5000)
	sf, _ := ids.NewSnowflake(1, 0, ids.SnowflakeOptions{Clock: c.now, MaxRollback: 5 * time.Millisecond})
	seen := map[int64]bool{}
	next := func() int64 {
		id, err := sf.Next()
		if err != nil {
			t.Fatal(err)
		}
		if seen[id] {
			t.Fatalf("duplicate %d", id)
		}
		seen[id] = true
		return id
	}
	a := next()
	c.ms.Store(4997) // 3 ms back: waited out
	got := make(chan int64)
	go func() { got <- next() }()
	select {
	case <-got:
		t.Fatal("did not wait out a small rollback")
	case <-time.After(30 * time.Millisecond):
	}
	c.ms.Store(5000)
	if b := <-got; b <= a {
		t.Fatalf("id went backwards: %d after %d", b, a)
	}
	c.ms.Store(4900) // 100 ms back: refused
	if _, err := sf.Next(); !errors.Is(err, ids.ErrClockBackwards) {
		t.Fatalf("large rollback: %v", err)
	}
	c.ms.Store(5001)
	next()
	// floor: a restart below the last recorded timestamp is refused
	if _, err := ids.NewSnowflake(1, 6000, ids.SnowflakeOptions{Clock: c.now}); !errors.Is(err, ids.ErrClockBehind) {
		t.Fatalf("start behind floor: %v", err)
	}
}

func TestLayoutValidation(t *testing.T) {
	t.Parallel()
	for _, l := range []ids.Layout{{TimeBits: 41, WorkerBits: 10, SeqBits: 10, Epoch: time.Now()}, {TimeBits: 41, WorkerBits: 10, SeqBits: 12}} {
		if _, err := ids.NewSnowflake(0, 0, ids.SnowflakeOptions{Layout: l}); !errors.Is(err, ids.ErrInvalid) {
			t.Fatalf("%+v: %v", l, err)
		}
	}
	if _, err := ids.NewSnowflake(1024, 0, ids.SnowflakeOptions{}); !errors.Is(err, ids.ErrInvalid) {
		t.Fatal("worker 1024 accepted with 10 worker bits")
	}
	l := ids.Layout{TimeBits: 43, WorkerBits: 5, SeqBits: 15, Epoch: ids.DefaultLayout.Epoch}
	sf, err := ids.NewSnowflake(31, 0, ids.SnowflakeOptions{Layout: l})
	if err != nil {
		t.Fatal(err)
	}
	id, _ := sf.Next()
	if d := l.Decode(id); d.Worker != 31 || time.Since(d.Time) > time.Minute {
		t.Fatalf("decode %+v", d)
	}
}

func TestUUIDv7Monotonic(t *testing.T) {
	t.Parallel()
	prev, _ := ids.NewUUIDv7()
	for i := 0; i < 200_000; i++ {
		u, err := ids.NewUUIDv7()
		if err != nil {
			t.Fatal(err)
		}
		if u.Version() != 7 || u.Variant() != uuid.RFC4122 || bytes.Compare(u[:], prev[:]) <= 0 {
			t.Fatalf("uuid %s not after %s (or not v7 / RFC 9562 variant)", u, prev)
		}
		prev = u
	}
	// The time field is the clock's milliseconds; parsing round-trips.
	u, _ := ids.NewUUIDv7()
	if sec, nsec := u.Time().UnixTime(); time.Since(time.Unix(sec, nsec)).Abs() > time.Second {
		t.Fatalf("uuid %s carries time %v", u, time.Unix(sec, nsec))
	}
	if p, err := uuid.Parse(u.String()); err != nil || p != u {
		t.Fatalf("parse %s: %v", u, err)
	}
}

// Concurrent callers: all distinct and each goroutine's sequence
// increasing.
func TestUUIDv7Concurrent(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	seen := map[uuid.UUID]bool{}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var prev uuid.UUID
			local := make([]uuid.UUID, 0, 20000)
			for i := 0; i < 20000; i++ {
				u, err := ids.NewUUIDv7()
				if err != nil || bytes.Compare(u[:], prev[:]) <= 0 {
					t.Errorf("uuid %s after %s: %v", u, prev, err)
					return
				}
				prev = u
				local = append(local, u)
			}
			mu.Lock()
			defer mu.Unlock()
			for _, u := range local {
				if seen[u] {
					t.Errorf("duplicate %s", u)
				}
				seen[u] = true
			}
		}()
	}
	wg.Wait()
}

// Low traffic (one id per millisecond): without RandomStart every id's
// sequence is 0 and id % 16 puts all of them in shard 0; with it the
// shards are even. Uniqueness and order hold either way, and a
// millisecond still issues ids until its sequence runs out.
func TestSnowflakeRandomStart(t *testing.T) {
	t.Parallel()
	shards := func(opt ids.SnowflakeOptions) [16]int {
		c := &fakeClock{}
		c.ms.Store(1000)
		opt.Clock = c.now
		sf, err := ids.NewSnowflake(1, 0, opt)
		if err != nil {
			t.Fatal(err)
		}
		var hist [16]int
		var last int64
		for i := 0; i < 1600; i++ {
			c.ms.Add(1)
			id, err := sf.Next()
			if err != nil || id <= last {
				t.Fatalf("id %d after %d: %v", id, last, err)
			}
			last = id
			hist[id%16]++
		}
		return hist
	}
	t.Run("off: one shard", func(t *testing.T) {
		if h := shards(ids.SnowflakeOptions{}); h[0] != 1600 {
			t.Fatalf("id %% 16 without RandomStart: %v, want all 1600 in shard 0 (the problem this option solves)", h)
		}
	})
	t.Run("on: even shards", func(t *testing.T) {
		h := shards(ids.SnowflakeOptions{RandomStart: 256})
		for i, n := range h {
			if n < 50 || n > 150 { // expected 100 each
				t.Fatalf("id %% 16 with RandomStart 256: shard %d has %d of 1600: %v", i, n, h)
			}
		}
	})
	t.Run("a busy millisecond still fills and waits", func(t *testing.T) {
		c := &fakeClock{}
		c.ms.Store(5000)
		sf, _ := ids.NewSnowflake(1, 0, ids.SnowflakeOptions{Clock: c.now, RandomStart: 2048})
		seen := map[int64]bool{}
		n := 0
		for {
			done := make(chan int64, 1)
			go func() { id, _ := sf.Next(); done <- id }()
			select {
			case id := <-done:
				if seen[id] || ids.DefaultLayout.Decode(id).Time != c.now() {
					t.Fatalf("id %d repeated or off this millisecond", id)
				}
				seen[id] = true
				n++
				continue
			case <-time.After(2 * time.Second): // only the blocked call waits this long: a loaded machine must not pass for a full millisecond
			}
			c.ms.Add(1)
			<-done
			break
		}
		if n < 4096-2048 || n > 4096 {
			t.Fatalf("one millisecond issued %d ids, want 2048..4096", n)
		}
	})
	t.Run("bounds", func(t *testing.T) {
		for _, bad := range []int{-1, 2049} {
			if _, err := ids.NewSnowflake(1, 0, ids.SnowflakeOptions{RandomStart: bad}); !errors.Is(err, ids.ErrInvalid) {
				t.Errorf("RandomStart %d: %v, want ErrInvalid", bad, err)
			}
		}
	})
}
