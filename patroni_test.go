//go:build ha

package sqlcoord_test

import (
	"context"
	"database/sql"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord/sqlcoordtest/dbtest"
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/localdb"
)

// startPatroni starts a 2-node Patroni cluster whose replication from each
// node goes through a proxy (to stall it), creates the test database and
// returns the cluster, the proxies and the database's multi-host DSN.
func startPatroni(t *testing.T, sync bool) (*localdb.Patroni, []*dbtest.Proxy, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var ports []int
	var proxies []*dbtest.Proxy
	for i := 0; i < 2; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		ports = append(ports, port)
		proxies = append(proxies, dbtest.NewProxy(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(port))))
	}
	p, err := localdb.StartPatroni(ctx, localdb.PatroniConfig{Nodes: 2, Sync: sync, Ports: ports,
		ConnectAddr: func(i, _ int) string { return proxies[i].Addr }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, px := range proxies {
			px.SetStalled(false)
		}
		p.Stop()
	})
	admin, err := sql.Open("pgx", p.NodeDSN(0, "postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.ExecContext(ctx, `CREATE DATABASE sqlcoord_patroni`); err != nil {
		t.Fatal(err)
	}
	return p, proxies, p.DSN("sqlcoord_patroni")
}

// patroniCaughtUp waits until node 1 has replayed what node 0 wrote.
func patroniCaughtUp(p *localdb.Patroni) func(testing.TB) {
	return func(t testing.TB) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		primary, _ := sql.Open("pgx", p.NodeDSN(0, "postgres"))
		defer primary.Close()
		standby, _ := sql.Open("pgx", p.NodeDSN(1, "postgres"))
		defer standby.Close()
		var lsn string
		if err := primary.QueryRowContext(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&lsn); err != nil {
			t.Fatal(err)
		}
		for ctx.Err() == nil {
			var ok bool
			if standby.QueryRowContext(ctx, `SELECT COALESCE(pg_last_wal_replay_lsn() >= $1::pg_lsn, false)`, lsn).Scan(&ok) == nil && ok {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatal("node 1 did not catch up")
	}
}

// make test-ha: Patroni 3 in its default asynchronous mode. The
// leader's replication stalls, acknowledged writes pile up on it alone, the
// leader machine is killed (Patroni and PostgreSQL, SIGKILL) and Patroni
// promotes the replica after its ttl. Clients follow through the
// multi-host DSN (target_session_attrs=read-write).
func TestPatroniAsyncFailover(t *testing.T) {
	t.Parallel()
	p, proxies, dsn := startPatroni(t, false)
	asyncFailoverScenario(t, dsn, patroniHooks(p, proxies))
}

// patroniHooks drive a 2-node Patroni cluster: stall node 1's replication,
// crash node 1 and wait until Patroni has promoted node 2.
func patroniHooks(p *localdb.Patroni, proxies []*dbtest.Proxy) failoverHooks {
	return failoverHooks{
		caughtUp: patroniCaughtUp(p),
		stall:    func() { proxies[0].SetStalled(true) },
		failover: func(t testing.TB) {
			start := time.Now()
			p.Crash(0)
			proxies[0].SetStalled(false)
			proxies[0].CutAll()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if _, err := p.WaitLeader(ctx, 0, time.Minute); err != nil {
				t.Fatal(err)
			}
			t.Logf("Patroni promoted node 2 %v after the crash", time.Since(start).Round(100*time.Millisecond))
		},
	}
}

// make test-ha: Patroni with synchronous_mode: a write during
// the stall is never acknowledged, and Patroni promotes the synchronous
// standby, which has everything acknowledged before.
func TestPatroniSyncFailover(t *testing.T) {
	t.Parallel()
	p, proxies, dsn := startPatroni(t, true)
	// synchronous_mode names the standby a moment after it streams
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for ctx.Err() == nil && !p.Nodes[1].API(ctx, "/sync") {
		time.Sleep(200 * time.Millisecond)
	}
	syncFailoverScenario(t, dsn, patroniHooks(p, proxies))
}
