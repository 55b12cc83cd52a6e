package pgstream

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord/dialects"
)

func TestInProgress(t *testing.T) {
	for _, c := range []struct {
		snap string
		xid  uint32
		want bool
	}{
		{"100:105:", 104, false},                                // completed, below xmax
		{"100:105:", 105, true},                                 // at xmax: not yet completed
		{"100:105:", 110, true},                                 // above xmax
		{"100:105:101,103", 103, true},                          // listed
		{"100:105:101,103", 102, false},                         // between, not listed
		{"4294967390:4294967400:4294967395", 4294967295, false}, // the epoch before, completed
		{"4294967390:4294967400:4294967395", 99, true},          // 4294967395 in the next epoch: listed
		{"4294967390:4294967400:", 104, true},                   // 4294967400 = xmax
	} {
		got, err := inProgress(c.snap, map[uint32]bool{c.xid: true})
		if err != nil || got != c.want {
			t.Errorf("inProgress(%q, %d) = %v, %v; want %v", c.snap, c.xid, got, err, c.want)
		}
	}
}

// A stream is behind when its commits arrive older than the least age
// seen (the clocks' offset and transit) by more than behindBy, whatever
// the offset between the server's clock and this one.
func TestStreamBehind(t *testing.T) {
	for _, offset := range []time.Duration{0, time.Hour, -time.Hour} {
		st := &stream{}
		at := func(age time.Duration) bool {
			st.observeLag(time.Now().Add(offset - age))
			return st.behind
		}
		if at(time.Millisecond) {
			t.Errorf("offset %v: behind at the first commit", offset)
		}
		if at(2 * time.Millisecond) {
			t.Errorf("offset %v: behind 1 ms over the floor", offset)
		}
		if !at(50 * time.Millisecond) {
			t.Errorf("offset %v: not behind 49 ms over the floor", offset)
		}
		if at(time.Millisecond) {
			t.Errorf("offset %v: still behind once caught up", offset)
		}
	}
}

// A transaction begun ahead whose BEGIN failed (the session ending, a
// server restart) is dropped without a rollback: there is nothing to roll
// back, and a driver's OwnedTx need not be usable after a failed begin.
func TestDropNextAfterAFailedBegin(t *testing.T) {
	a := &ahead{done: make(chan struct{}), tx: failedTx{}, err: errors.New("begin failed")}
	close(a.done)
	st := &stream{next: a}
	st.dropNext()
	if st.next != nil {
		t.Fatal("dropNext kept the transaction begun ahead")
	}
}

// failedTx is what a driver might hand back beside a BEGIN error: any use
// of it fails the test.
type failedTx struct{ dialects.OwnedTx }

func (failedTx) Rollback(context.Context) error {
	panic("rolled back a transaction whose BEGIN failed")
}
