package dbtest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord/sqlcoordtest/localdb"
)

// PGReplicaSet is a PostgreSQL primary with several asynchronous hot
// standbys streaming from it directly, all throwaway servers of the
// test's own, and Front, the floating address clients use (Point moves
// it). Standbys are never re-pointed: after a promotion the others keep
// the old primary's history, which is how two promotions in a row fork it.
type PGReplicaSet struct {
	Nodes []*Server // Nodes[0] starts as the primary
	Front *Proxy
	Name  string
}

// NewPGReplicaSet starts a primary and standbys standbys.
func NewPGReplicaSet(t testing.TB, standbys int) *PGReplicaSet {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := []string{"-c", "shared_buffers=32MB", "-c", "max_connections=200", "-c", "wal_level=replica",
		"-c", "max_wal_senders=10", "-c", "wal_sender_timeout=0"}
	primary, err := localdb.StartPostgres(ctx, args...)
	if err != nil {
		t.Fatalf("primary: %v", err)
	}
	t.Cleanup(func() { primary.Stop() })
	r := &PGReplicaSet{Nodes: []*Server{primary}, Name: "sqlcoord_forks"}
	if _, err := primary.CreateDatabase(ctx, r.Name); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < standbys; i++ {
		s, err := localdb.StartStandby(ctx, primary.Host, primary.Port, "-c", "shared_buffers=32MB", "-c", "max_connections=200",
			"-c", "wal_receiver_timeout=0")
		if err != nil {
			t.Fatalf("standby %d: %v", i+1, err)
		}
		t.Cleanup(func() { s.Stop() })
		r.Nodes = append(r.Nodes, s)
	}
	r.Front = NewProxy(t, addr(primary))
	return r
}

// DSN reaches the test database through Front.
func (r *PGReplicaSet) DSN() string {
	return strings.Replace(r.Nodes[0].DSN(r.Name), addr(r.Nodes[0]), r.Front.Addr, 1)
}

// WaitCaughtUp waits until standby i has replayed everything node from
// has written so far.
func (r *PGReplicaSet) WaitCaughtUp(t testing.TB, from, i int) {
	t.Helper()
	c := &PGCluster{Primary: r.Nodes[from], Standby: r.Nodes[i]}
	c.WaitCaughtUp(t)
}

// Promote ends recovery on node i (whatever it has received).
func (r *PGReplicaSet) Promote(t testing.TB, i int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := r.Nodes[i].Promote(ctx); err != nil {
		t.Fatal(err)
	}
}

// Point moves Front to node i and cuts every client connection (a
// floating IP moving).
func (r *PGReplicaSet) Point(i int) {
	r.Front.SetTarget(addr(r.Nodes[i]))
	r.Front.CutAll()
}

// Crash SIGKILLs node i (the postmaster and every backend at once).
func (r *PGReplicaSet) Crash(i int) { r.Nodes[i].Crash() }
