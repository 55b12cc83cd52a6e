package localdb

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// galeraProvider is Debian's galera-4 library.
const galeraProvider = "/usr/lib/galera/libgalera_smm.so"

// StartGalera starts a throwaway MariaDB Galera cluster of n nodes on
// loopback (Debian packages mariadb-server, galera-4 and rsync; `make
// setup` installs them): the first node bootstraps the cluster, the others
// join it one by one with an rsync state transfer. Every node is a
// writable primary. Stop each node when done.
func StartGalera(ctx context.Context, n int) ([]*Server, error) {
	if _, err := os.Stat(galeraProvider); err != nil {
		return nil, fmt.Errorf("localdb: %s not found (apt-get install -y galera-4 rsync, or run `make setup`)", galeraProvider)
	}
	type ports struct{ sql, gcomm, ist, sst int }
	ps := make([]ports, n)
	var addrs []string
	for i := range ps {
		var err error
		for _, p := range []*int{&ps[i].sql, &ps[i].gcomm, &ps[i].ist, &ps[i].sst} {
			if *p, err = freePort(); err != nil {
				return nil, err
			}
		}
		addrs = append(addrs, "127.0.0.1:"+strconv.Itoa(ps[i].gcomm))
	}
	var nodes []*Server
	stopAll := func() {
		for _, s := range nodes {
			s.Stop()
		}
	}
	for i, p := range ps {
		m, err := installMariaDB(ctx, "galera")
		if err != nil {
			stopAll()
			return nil, err
		}
		extra := []string{"--innodb-buffer-pool-size=64M", "--binlog-format=ROW", "--innodb-autoinc-lock-mode=2",
			"--wsrep-on=ON", "--wsrep-provider=" + galeraProvider,
			"--wsrep-cluster-address=gcomm://" + strings.Join(addrs, ","),
			"--wsrep-node-address=" + addrs[i], "--wsrep-node-name=node" + strconv.Itoa(i+1),
			fmt.Sprintf("--wsrep-provider-options=base_port=%d;ist.recv_addr=127.0.0.1:%d;gcache.size=32M", p.gcomm, p.ist),
			fmt.Sprintf("--wsrep-sst-receive-address=127.0.0.1:%d", p.sst), "--wsrep-sst-method=rsync"}
		if i == 0 {
			extra = append(extra, "--wsrep-new-cluster")
		}
		s := m.server(p.sql, extra)
		if err := s.spawn(); err != nil {
			os.RemoveAll(m.dir)
			stopAll()
			return nil, err
		}
		nodes = append(nodes, s)
		if err := s.waitReady(ctx, 90*time.Second); err != nil {
			stopAll()
			return nil, err
		}
		if err := waitGalera(ctx, s, i+1); err != nil {
			stopAll()
			return nil, err
		}
	}
	return nodes, nil
}

// waitGalera waits until node is synced in a cluster of at least size.
func waitGalera(ctx context.Context, node *Server, size int) error {
	db, err := node.Admin()
	if err != nil {
		return err
	}
	defer db.Close()
	deadline := time.Now().Add(60 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		var k, ready, k2, n string
		err1 := db.QueryRowContext(ctx, `SHOW STATUS LIKE 'wsrep_ready'`).Scan(&k, &ready)
		err2 := db.QueryRowContext(ctx, `SHOW STATUS LIKE 'wsrep_cluster_size'`).Scan(&k2, &n)
		if err1 == nil && err2 == nil {
			if got, _ := strconv.Atoi(n); ready == "ON" && got >= size {
				return nil
			}
			last = fmt.Sprintf("ready %s, cluster size %s", ready, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("localdb: galera node on port %d not synced after 60s (%s); log:\n%s", node.Port, last, node.logTail())
}
