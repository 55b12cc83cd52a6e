package main

// Leader election beside etcd's (clientv3/concurrency, Debian's
// etcd-server on a throwaway local member): failover after SIGKILL and
// after SIGSTOP of the leader's process at the same TTL, how long an
// observer takes to see the new leader, and campaign+resign throughput.
// Candidates are processes of this binary (PEERS_ROLE=candidate), so the
// faults are real signals to real processes.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/coord"
	_ "github.com/sqlcoord/sqlcoord/pgxv5" // LISTEN/NOTIFY through database/sql: the observers' wake-up
	"github.com/sqlcoord/sqlcoord/sqlcoordtest/localdb"
)

// electionTTL is both systems' leadership TTL. etcd's lease TTL is whole
// seconds and at least 1.5 × its election timeout (1 s by default), so
// 2 s is its smallest honest setting.
const electionTTL = 2 * time.Second

// electionSystem is one side of the comparison.
type electionSystem struct {
	name string
	addr string // etcd endpoint or DSN
}

// candidateMain is a candidate process: it campaigns in election NAME,
// prints "CAMPAIGNING", then "LEADER <unix ns>" once elected, and leads
// until killed.
func candidateMain() {
	ctx := context.Background()
	sys, addr, name, id := os.Getenv("SYSTEM"), os.Getenv("ADDR"), os.Getenv("NAME"), os.Getenv("ID")
	switch sys {
	case "etcd":
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}, DialTimeout: 5 * time.Second})
		if err != nil {
			fail(err)
		}
		s, err := concurrency.NewSession(cli, concurrency.WithTTL(int(electionTTL/time.Second)))
		if err != nil {
			fail(err)
		}
		e := concurrency.NewElection(s, "/"+name)
		fmt.Println("CAMPAIGNING")
		if err := e.Campaign(ctx, id); err != nil {
			fail(err)
		}
		fmt.Println("LEADER", time.Now().UnixNano())
	default:
		db, err := sqlcoord.Open(ctx, addr, sqlcoord.Options{MaxOpenConns: 4})
		if err != nil {
			fail(err)
		}
		e, err := coord.New(db).Election(name, coord.ElectionOptions{ID: id, TTL: electionTTL})
		if err != nil {
			fail(err)
		}
		fmt.Println("CAMPAIGNING")
		if _, err := e.Campaign(ctx, id); err != nil {
			fail(err)
		}
		fmt.Println("LEADER", time.Now().UnixNano())
	}
	select {}
}

// candidate is a running candidate process.
type candidate struct {
	cmd   *exec.Cmd
	lines chan string
}

func startCandidate(sys electionSystem, name, id string) (*candidate, error) {
	return startRole("candidate", "SYSTEM="+sys.name, "ADDR="+sys.addr, "NAME="+name, "ID="+id)
}

// startRole starts a process of this binary in role (PEERS_ROLE) with env.
func startRole(role string, env ...string) (*candidate, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self)
	cmd.Env = append(append(os.Environ(), "PEERS_ROLE="+role), env...)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &candidate{cmd: cmd, lines: make(chan string, 4096)}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	return c, nil
}

func (c *candidate) wait(prefix string, d time.Duration) (string, error) {
	t := time.After(d)
	for {
		select {
		case l, ok := <-c.lines:
			if !ok {
				return "", fmt.Errorf("candidate exited before %q", prefix)
			}
			if strings.HasPrefix(l, prefix) {
				return l, nil
			}
		case <-t:
			return "", fmt.Errorf("no %q within %v", prefix, d)
		}
	}
}

func (c *candidate) kill() {
	c.cmd.Process.Signal(syscall.SIGCONT)
	c.cmd.Process.Kill()
	c.cmd.Wait()
}

// observer reports when it first sees leader id.
type observer interface {
	seen(id string) <-chan time.Time
}

// failover measures one fault: a leader, a queued follower, the signal to
// the leader; the follower's election time minus the signal's, and the
// observer's sighting minus the follower's election.
func failover(sys electionSystem, sig syscall.Signal, round int, obs func(name string) (observer, func(), error)) (fo, seen float64, err error) {
	name := fmt.Sprintf("failover-%s-%d-%d", sys.name, sig, round)
	o, stop, err := obs(name)
	if err != nil {
		return 0, 0, err
	}
	defer stop()
	leader, err := startCandidate(sys, name, "leader")
	if err != nil {
		return 0, 0, err
	}
	defer leader.kill()
	if _, err := leader.wait("LEADER", 30*time.Second); err != nil {
		return 0, 0, err
	}
	follower, err := startCandidate(sys, name, "follower")
	if err != nil {
		return 0, 0, err
	}
	defer follower.kill()
	if _, err := follower.wait("CAMPAIGNING", 30*time.Second); err != nil {
		return 0, 0, err
	}
	sighted := o.seen("follower")
	time.Sleep(500 * time.Millisecond) // the follower's campaign is queued / watching
	at := time.Now()
	leader.cmd.Process.Signal(sig)
	l, err := follower.wait("LEADER", 4*electionTTL+10*time.Second)
	if err != nil {
		return 0, 0, err
	}
	ns, _ := strconv.ParseInt(strings.Fields(l)[1], 10, 64)
	elected := time.Unix(0, ns)
	select {
	case s := <-sighted:
		return float64(elected.Sub(at).Milliseconds()), float64(s.Sub(elected).Microseconds()) / 1000, nil
	case <-time.After(10 * time.Second):
		return 0, 0, errors.New("the observer never saw the new leader")
	}
}

// sqlcoordObserver watches an election with coord's Observe.
type chanObserver struct{ ch chan chanSight }

type chanSight struct {
	id string
	at time.Time
}

func (o *chanObserver) seen(id string) <-chan time.Time {
	out := make(chan time.Time, 1)
	go func() {
		for s := range o.ch {
			if s.id == id {
				out <- s.at
				return
			}
		}
	}()
	return out
}

func sqlcoordObserve(db *sqlcoord.DB) func(name string) (observer, func(), error) {
	return func(name string) (observer, func(), error) {
		e, err := coord.New(db).Election(name, coord.ElectionOptions{ID: "observer"})
		if err != nil {
			return nil, nil, err
		}
		ctx, stop := context.WithCancel(context.Background())
		ch, err := e.Observe(ctx)
		if err != nil {
			stop()
			return nil, nil, err
		}
		o := &chanObserver{ch: make(chan chanSight, 64)}
		go func() {
			for l := range ch {
				if l.Live {
					o.ch <- chanSight{l.ID, time.Now()}
				}
			}
		}()
		return o, stop, nil
	}
}

func etcdObserve(cli *clientv3.Client) func(name string) (observer, func(), error) {
	return func(name string) (observer, func(), error) {
		s, err := concurrency.NewSession(cli, concurrency.WithTTL(int(electionTTL/time.Second)))
		if err != nil {
			return nil, nil, err
		}
		ctx, stop := context.WithCancel(context.Background())
		ch := concurrency.NewElection(s, "/"+name).Observe(ctx)
		o := &chanObserver{ch: make(chan chanSight, 64)}
		go func() {
			for r := range ch {
				if len(r.Kvs) > 0 {
					o.ch <- chanSight{string(r.Kvs[0].Value), time.Now()}
				}
			}
		}()
		return o, func() { stop(); s.Close() }, nil
	}
}

// campaignResign counts campaign+resign cycles per second in one process.
func campaignResign(ctx context.Context, sys electionSystem, db *sqlcoord.DB, cli *clientv3.Client) (float64, error) {
	n := 0
	start := time.Now()
	switch sys.name {
	case "etcd":
		s, err := concurrency.NewSession(cli, concurrency.WithTTL(int(electionTTL/time.Second)))
		if err != nil {
			return 0, err
		}
		defer s.Close()
		e := concurrency.NewElection(s, "/cycles")
		for time.Since(start) < *dur {
			if err := e.Campaign(ctx, "me"); err != nil {
				return 0, err
			}
			if err := e.Resign(ctx); err != nil {
				return 0, err
			}
			n++
		}
	default:
		e, err := coord.New(db).Election("cycles", coord.ElectionOptions{TTL: electionTTL})
		if err != nil {
			return 0, err
		}
		for time.Since(start) < *dur {
			l, err := e.Campaign(ctx, "me")
			if err != nil {
				return 0, err
			}
			if err := l.Resign(ctx); err != nil {
				return 0, err
			}
			n++
		}
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

// startEtcd runs a one-member etcd (Debian's etcd-server) in a temp dir.
func startEtcd(ctx context.Context) (string, func(), error) {
	bin, err := exec.LookPath("etcd")
	if err != nil {
		return "", nil, errors.New("etcd not installed (make test-ha installs Debian's etcd-server)")
	}
	dir, err := os.MkdirTemp("", "peers-etcd")
	if err != nil {
		return "", nil, err
	}
	port := func() int {
		l, _ := net.Listen("tcp", "127.0.0.1:0")
		defer l.Close()
		return l.Addr().(*net.TCPAddr).Port
	}
	client, peer := fmt.Sprintf("http://127.0.0.1:%d", port()), fmt.Sprintf("http://127.0.0.1:%d", port())
	cmd := exec.Command(bin, "--name", "peers", "--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "peers="+peer, "--log-level", "error")
	cmd.Env = append(os.Environ(), "ETCD_UNSUPPORTED_ARCH="+os.Getenv("ETCD_UNSUPPORTED_ARCH"))
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop := func() { cmd.Process.Kill(); cmd.Wait(); os.RemoveAll(dir) }
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{client}, DialTimeout: 5 * time.Second})
	if err != nil {
		stop()
		return "", nil, err
	}
	defer cli.Close()
	for deadline := time.Now().Add(30 * time.Second); ; {
		c, cancel := context.WithTimeout(ctx, time.Second)
		_, err := cli.Put(c, "/ready", "1")
		cancel()
		if err == nil {
			return client, stop, nil
		}
		if time.Now().After(deadline) {
			stop()
			return "", nil, fmt.Errorf("etcd did not answer: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// electionRows compares sqlcoord's election on db (dsn) with etcd's.
func electionRows(ctx context.Context, db *sqlcoord.DB, dsn, etcdAddr, dialect string) []row {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{etcdAddr}, DialTimeout: 5 * time.Second})
	if err != nil {
		fail(err)
	}
	defer cli.Close()
	ours, theirs := electionSystem{"sqlcoord", dsn}, electionSystem{"etcd", etcdAddr}
	var out []row
	sigName := map[syscall.Signal]string{syscall.SIGKILL: "SIGKILL", syscall.SIGSTOP: "SIGSTOP"}
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGSTOP} {
		fo := row{name: fmt.Sprintf("election failover after %s, TTL %v, %s", sigName[sig], electionTTL, dialect), unit: "ms, lower is better", peer: "etcd " + etcdVersion()}
		ob := row{name: fmt.Sprintf("observer sees the new leader (%s rounds), %s", sigName[sig], dialect), unit: "ms from the new leader's Campaign returning; below 0: seen first", peer: "etcd Observe", absolute: true}
		for r := 0; r < *rounds; r++ {
			sides := []func(){
				func() {
					f, s, err := failover(ours, sig, r, sqlcoordObserve(db))
					if err != nil {
						fail(fmt.Errorf("sqlcoord failover: %w", err))
					}
					fo.ours, ob.ours = append(fo.ours, f), append(ob.ours, s)
				},
				func() {
					f, s, err := failover(theirs, sig, r, etcdObserve(cli))
					if err != nil {
						fail(fmt.Errorf("etcd failover: %w", err))
					}
					fo.theirs, ob.theirs = append(fo.theirs, f), append(ob.theirs, s)
				},
			}
			if r%2 == 1 {
				sides[0], sides[1] = sides[1], sides[0]
			}
			sides[0]()
			sides[1]()
			fmt.Fprintf(os.Stderr, "election %s %s round %d: failover sqlcoord %.0f ms, etcd %.0f ms; observer %.2f / %.2f ms\n", dialect, sigName[sig], r, fo.ours[r], fo.theirs[r], ob.ours[r], ob.theirs[r])
		}
		out = append(out, fo, ob)
	}
	cr := row{name: "election campaign+resign, one process, " + dialect, unit: "cycles/s", peer: "etcd"}
	for r := 0; r < *rounds; r++ {
		a, err := campaignResign(ctx, ours, db, cli)
		if err != nil {
			fail(err)
		}
		b, err := campaignResign(ctx, theirs, db, cli)
		if err != nil {
			fail(err)
		}
		cr.ours, cr.theirs = append(cr.ours, a), append(cr.theirs, b)
	}
	return append(out, cr)
}

func etcdVersion() string {
	out, err := exec.Command("etcd", "--version").Output()
	if err != nil {
		return "?"
	}
	for _, l := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(l, "etcd Version: "); ok {
			return v
		}
	}
	return "?"
}

// elections runs the election comparisons on throwaway PostgreSQL and
// MariaDB servers beside a throwaway etcd. Without etcd installed they are
// skipped unless asked for by name.
func elections(ctx context.Context, asked bool) []row {
	addr, stop, err := startEtcd(ctx)
	if err != nil {
		if asked {
			fail(err)
		}
		fmt.Fprintln(os.Stderr, "peers: election comparison skipped:", err)
		return nil
	}
	defer stop()
	want := func(name string) bool { return *only == "" || strings.Contains(","+*only+",", ","+name+",") }
	var out []row
	for _, fam := range []struct{ family, only, dialect string }{{"postgres", "election", "PostgreSQL"}, {"mysql", "election-mariadb", "MariaDB"}} {
		if !want(fam.only) {
			continue
		}
		srv, err := localdb.Start(ctx, fam.family)
		if err != nil {
			fail(err)
		}
		dsn, err := srv.CreateDatabase(ctx, "peers_election")
		if err != nil {
			srv.Stop()
			fail(err)
		}
		db := open(ctx, dsn)
		out = append(out, electionRows(ctx, db, dsn, addr, fam.dialect)...)
		db.Close()
		srv.Stop()
	}
	return out
}
