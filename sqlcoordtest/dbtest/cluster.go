package dbtest

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord/sqlcoordtest/localdb"
)

// PGCluster is a PostgreSQL primary with one streaming hot standby, both
// throwaway local servers of the test's own (never the shared one), with
// the standby's replication connection and the clients' connections each
// through a Proxy: Link can stall or cut replication, Front is the
// floating address clients use and Failover moves.
type PGCluster struct {
	Primary, Standby *Server
	Link             *Proxy // standby -> primary replication
	Front            *Proxy // clients -> the current primary
	Name             string // the test database (created on the primary, replicated)
}

// NewPGCluster starts the pair: with sync, every commit waits until the
// standby has flushed it (synchronous_standby_names='*'); otherwise
// replication is asynchronous (PostgreSQL's and Patroni's default).
func NewPGCluster(t testing.TB, sync bool) *PGCluster {
	t.Helper()
	return NewPGClusterWith(t, sync)
}

// NewPGClusterWith is NewPGCluster with extra arguments for the primary
// (e.g. "-c", "wal_level=logical"; the standby's are the defaults).
func NewPGClusterWith(t testing.TB, sync bool, extra ...string) *PGCluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := []string{"-c", "shared_buffers=32MB", "-c", "max_connections=200", "-c", "synchronous_commit=on",
		"-c", "wal_level=replica", "-c", "max_wal_senders=5", "-c", "wal_sender_timeout=0"}
	if sync {
		args = append(args, "-c", "synchronous_standby_names=*")
	}
	args = append(args, extra...)
	primary, err := localdb.StartPostgres(ctx, args...)
	if err != nil {
		t.Fatalf("primary: %v", err)
	}
	t.Cleanup(func() { primary.Stop() })
	c := &PGCluster{Primary: primary, Name: "sqlcoord_ha"}
	c.Link = NewProxy(t, addr(primary))
	t.Cleanup(func() { c.Link.SetStalled(false) })
	lh, lp, _ := net.SplitHostPort(c.Link.Addr)
	port, _ := strconv.Atoi(lp)
	standby, err := localdb.StartStandby(ctx, lh, port, "-c", "shared_buffers=32MB", "-c", "max_connections=200",
		"-c", "wal_receiver_timeout=0")
	if err != nil {
		t.Fatalf("standby: %v", err)
	}
	t.Cleanup(func() { standby.Stop() })
	c.Standby = standby
	if _, err := primary.CreateDatabase(ctx, c.Name); err != nil {
		t.Fatal(err)
	}
	c.Front = NewProxy(t, addr(primary))
	c.WaitCaughtUp(t)
	return c
}

func addr(s *Server) string { return net.JoinHostPort(s.Host, strconv.Itoa(s.Port)) }

// DSN reaches the test database through Front (the current primary).
func (c *PGCluster) DSN() string {
	return strings.Replace(c.Primary.DSN(c.Name), addr(c.Primary), c.Front.Addr, 1)
}

// StandbyDSN reaches the test database on the standby directly.
func (c *PGCluster) StandbyDSN() string { return c.Standby.DSN(c.Name) }

// WaitCaughtUp waits until the standby has replayed everything the
// primary has inserted into its WAL so far (committed, flushed or not).
func (c *PGCluster) WaitCaughtUp(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := c.Primary.Admin()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	s, err := c.Standby.Admin()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var lsn string
	// The insert position, not the write position: a commit without
	// waiting for its flush (a lease's release) is inserted before the WAL
	// writer writes it, and a standby promoted without it would lose it.
	if err := p.QueryRowContext(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&lsn); err != nil {
		t.Fatal(err)
	}
	for {
		var ok bool
		err := s.QueryRowContext(ctx, `SELECT COALESCE(pg_last_wal_replay_lsn() >= $1::pg_lsn, false)`, lsn).Scan(&ok)
		if err == nil && ok {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("standby did not catch up to %s: %v", lsn, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Failover crashes the whole primary (SIGKILL of every process), promotes
// the standby with whatever WAL it had received, and moves Front to it,
// cutting every client connection (a floating IP moving).
func (c *PGCluster) Failover(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c.Primary.Crash()
	c.Link.SetStalled(false)
	c.Link.CutAll()
	if err := c.Standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	c.Front.SetTarget(addr(c.Standby))
	c.Front.CutAll()
}

// Galera is a throwaway MariaDB Galera cluster with a test database.
type Galera struct {
	Nodes []*Server
	Name  string
}

// NewGalera starts an n-node Galera cluster (stopped when t ends) and
// creates the test database (replicated to every node).
func NewGalera(t testing.TB, n int) *Galera {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// The nodes' four ports each are picked before any node binds them:
	// another process may take one meanwhile, so start again on fresh
	// ports before giving up.
	var nodes []*Server
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if nodes, err = localdb.StartGalera(ctx, n); err == nil {
			break
		}
		t.Logf("galera start %d: %v", attempt+1, err)
	}
	if err != nil {
		t.Fatalf("galera: %v", err)
	}
	t.Cleanup(func() {
		for _, s := range nodes {
			s.Stop()
		}
	})
	g := &Galera{Nodes: nodes, Name: "sqlcoord_galera"}
	if _, err := nodes[0].CreateDatabase(ctx, g.Name); err != nil {
		t.Fatal(err)
	}
	// The other nodes apply the CREATE DATABASE asynchronously (Galera
	// certifies writes synchronously, applies them later): wait until
	// every node has it, or a test opening node 1 at once finds "Unknown
	// database".
	for _, s := range nodes[1:] {
		if err := waitDatabase(ctx, s, g.Name); err != nil {
			t.Fatal(err)
		}
	}
	return g
}

// DSN reaches the test database on node i.
func (g *Galera) DSN(i int) string { return g.Nodes[i].DSN(g.Name) }

// waitDatabase waits until server s lists database name.
func waitDatabase(ctx context.Context, s *Server, name string) error {
	db, err := s.Admin()
	if err != nil {
		return err
	}
	defer db.Close()
	for {
		var n int
		err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?`, name).Scan(&n)
		if err == nil && n == 1 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("galera: database %s did not reach %s:%d: %v", name, s.Host, s.Port, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
