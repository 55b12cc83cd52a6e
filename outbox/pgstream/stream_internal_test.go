package pgstream

import "testing"

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
