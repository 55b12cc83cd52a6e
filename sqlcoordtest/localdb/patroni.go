//go:build ha

package localdb

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Patroni is a throwaway Patroni cluster (Debian packages patroni and
// etcd-server; `make test-ha` installs them): one etcd member and n
// PostgreSQL nodes, each run by its own Patroni, all as the postgres user
// on loopback. Only under the ha build tag: it is slow (a failover waits
// for Patroni's ttl, about 10 s).
type Patroni struct {
	dir   string
	cred  *syscall.Credential
	etcd  *exec.Cmd
	Nodes []*PatroniNode
}

// PatroniNode is one Patroni + PostgreSQL pair.
type PatroniNode struct {
	Name    string
	PGPort  int
	APIPort int
	data    string
	cmd     *exec.Cmd
}

// PatroniConfig tunes StartPatroni.
type PatroniConfig struct {
	Nodes int
	// Sync turns on Patroni's synchronous_mode (a commit waits for the
	// synchronous standby; only it is promoted).
	Sync bool
	// ConnectAddr, if set, is the address other nodes replicate from for
	// node i (e.g. a proxy in front of its PGPort, to stall replication).
	ConnectAddr func(i, pgPort int) string
	// Ports, if set, are the nodes' PostgreSQL ports (chosen by the caller
	// to put proxies in front of them first).
	Ports []int
}

// StartPatroni starts etcd and the nodes one after the other (the first
// bootstraps and leads) and waits until every replica streams.
func StartPatroni(ctx context.Context, c PatroniConfig) (*Patroni, error) {
	bin, err := findPgBin()
	if err != nil {
		return nil, err
	}
	for _, b := range []string{"patroni", "etcd"} {
		if _, err := exec.LookPath(b); err != nil {
			return nil, fmt.Errorf("localdb: %s not found (apt-get install -y patroni etcd-server, or run `make test-ha`)", b)
		}
	}
	cred, uid, gid, err := serviceUser("postgres")
	if err != nil {
		return nil, err
	}
	dir, err := newDir("patroni", uid, gid)
	if err != nil {
		return nil, err
	}
	p := &Patroni{dir: dir, cred: cred}
	cport, _ := freePort()
	pport, _ := freePort()
	p.etcd = exec.Command("etcd", "--name", "e1", "--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", fmt.Sprintf("http://127.0.0.1:%d", cport), "--advertise-client-urls", fmt.Sprintf("http://127.0.0.1:%d", cport),
		"--listen-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", pport), "--initial-advertise-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", pport),
		"--initial-cluster", fmt.Sprintf("e1=http://127.0.0.1:%d", pport))
	if err := p.start(p.etcd, "etcd.log"); err != nil {
		p.Stop()
		return nil, err
	}
	for i := 0; i < c.Nodes; i++ {
		n := &PatroniNode{Name: "node" + strconv.Itoa(i+1), data: filepath.Join(dir, "data"+strconv.Itoa(i+1))}
		if c.Ports != nil {
			n.PGPort = c.Ports[i]
		} else if n.PGPort, err = freePort(); err != nil {
			p.Stop()
			return nil, err
		}
		if n.APIPort, err = freePort(); err != nil {
			p.Stop()
			return nil, err
		}
		connect := fmt.Sprintf("127.0.0.1:%d", n.PGPort)
		if c.ConnectAddr != nil {
			connect = c.ConnectAddr(i, n.PGPort)
		}
		conf := fmt.Sprintf(`scope: sqlcoord
name: %s
restapi:
  listen: 127.0.0.1:%d
  connect_address: 127.0.0.1:%d
etcd3:
  hosts: 127.0.0.1:%d
bootstrap:
  dcs:
    ttl: 10
    loop_wait: 1
    retry_timeout: 4
    maximum_lag_on_failover: 1073741824
    synchronous_mode: %v
    postgresql:
      use_pg_rewind: false
      parameters:
        wal_level: replica
        hot_standby: "on"
        max_wal_senders: 5
        max_replication_slots: 5
        max_connections: 200
  initdb:
  - encoding: UTF8
  - locale: C
  pg_hba:
  - host replication all 127.0.0.1/32 trust
  - host all all 127.0.0.1/32 trust
postgresql:
  listen: 127.0.0.1:%d
  connect_address: %s
  data_dir: %s
  bin_dir: %s
  pgpass: %s
  authentication:
    superuser:
      username: postgres
    replication:
      username: postgres
  parameters:
    unix_socket_directories: %s
    fsync: "off"
    shared_buffers: 32MB
`, n.Name, n.APIPort, n.APIPort, cport, c.Sync, n.PGPort, connect, n.data, bin, filepath.Join(dir, "pgpass"+n.Name), dir)
		yml := filepath.Join(dir, n.Name+".yml")
		if err := os.WriteFile(yml, []byte(conf), 0o644); err != nil {
			p.Stop()
			return nil, err
		}
		os.Chown(yml, int(cred.Uid), int(cred.Gid))
		n.cmd = exec.Command("patroni", yml)
		if err := p.start(n.cmd, n.Name+".log"); err != nil {
			p.Stop()
			return nil, err
		}
		p.Nodes = append(p.Nodes, n)
		want := "/leader"
		if i > 0 {
			want = "/replica?lag=1MB"
		}
		if err := p.waitAPI(ctx, n, want, 90*time.Second); err != nil {
			p.Stop()
			return nil, err
		}
	}
	return p, nil
}

func (p *Patroni) start(cmd *exec.Cmd, logName string) error {
	logf, err := os.OpenFile(filepath.Join(p.dir, logName), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr, cmd.Dir = logf, logf, p.dir
	cmd.Env = append(os.Environ(), "HOME="+p.dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: p.cred}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	go func() { cmd.Wait(); logf.Close() }()
	return nil
}

// waitAPI waits until node's REST API answers 200 on path.
func (p *Patroni) waitAPI(ctx context.Context, n *PatroniNode, path string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if n.API(ctx, path) {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		time.Sleep(200 * time.Millisecond)
	}
	b, _ := os.ReadFile(filepath.Join(p.dir, n.Name+".log"))
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return fmt.Errorf("localdb: patroni %s: no 200 on %s after %v; log:\n%s", n.Name, path, limit, b)
}

// API reports whether node's REST API answers 200 on path (/leader,
// /replica, /sync, …).
func (n *PatroniNode) API(ctx context.Context, path string) bool {
	rctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(rctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d%s", n.APIPort, path), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Leader returns the index of the node whose API says it leads, or -1.
func (p *Patroni) Leader(ctx context.Context) int {
	for i, n := range p.Nodes {
		if n.cmd != nil && n.API(ctx, "/leader") {
			return i
		}
	}
	return -1
}

// WaitLeader waits until a node other than not leads and accepts writes,
// and returns it.
func (p *Patroni) WaitLeader(ctx context.Context, not int, limit time.Duration) (int, error) {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if l := p.Leader(ctx); l >= 0 && l != not {
			return l, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return -1, fmt.Errorf("localdb: no new Patroni leader after %v", limit)
}

// Crash SIGKILLs node i's Patroni and its PostgreSQL (postmaster and
// backends) at once: the machine is gone.
func (p *Patroni) Crash(i int) {
	n := p.Nodes[i]
	if n.cmd == nil {
		return
	}
	if b, err := os.ReadFile(filepath.Join(n.data, "postmaster.pid")); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0])); err == nil {
			syscall.Kill(-pid, syscall.SIGKILL)
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL)
	n.cmd = nil
}

// DSN lists every node (pgx tries them in order; sqlcoord.Open's
// target_session_attrs=read-write picks the leader).
func (p *Patroni) DSN(database string) string {
	var hosts []string
	for _, n := range p.Nodes {
		hosts = append(hosts, fmt.Sprintf("127.0.0.1:%d", n.PGPort))
	}
	return fmt.Sprintf("postgres://postgres@%s/%s?sslmode=disable", strings.Join(hosts, ","), database)
}

// NodeDSN reaches node i alone.
func (p *Patroni) NodeDSN(i int, database string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", p.Nodes[i].PGPort, database)
}

// Stop kills everything and removes the directory.
func (p *Patroni) Stop() {
	for i := range p.Nodes {
		p.Crash(i)
	}
	if p.etcd != nil && p.etcd.Process != nil {
		syscall.Kill(-p.etcd.Process.Pid, syscall.SIGKILL)
	}
	time.Sleep(200 * time.Millisecond)
	os.RemoveAll(p.dir)
}
