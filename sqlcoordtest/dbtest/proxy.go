package dbtest

import (
	"bytes"
	"context"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqlcoord/sqlcoord"
)

// Proxy is a small TCP proxy on loopback between a client and a database
// server, for injecting network faults: cutting every connection, or
// cutting one right after (or instead of) forwarding a COMMIT.
type Proxy struct {
	Addr   string
	target string
	ln     net.Listener

	mu    sync.Mutex
	gen   int                   // SetTarget's count: a connection dialled before a switch is dropped
	conns map[net.Conn]net.Conn // client -> server
	arm   *commitCut
	down  bool
	rand  *randomCut
	delay atomic.Int64 // ns added before each server -> client write
	stall atomic.Bool  // hold every byte in both directions
	stmts atomic.Int64 // statements clients sent through (Statements)
}

// randomCut cuts a share of all COMMITs, each in one of three ways chosen
// at random (see CutCommits).
type randomCut struct {
	rate     float64
	maxDelay time.Duration
	rng      *rand.Rand
	cuts     atomic.Int64
}

type commitCut struct {
	forward bool
	fired   chan struct{}
}

// NewProxy listens on a free loopback port and forwards to target
// ("host:port"). It is closed at the end of the test.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{Addr: ln.Addr().String(), target: target, ln: ln, conns: map[net.Conn]net.Conn{}}
	go p.accept()
	t.Cleanup(func() { ln.Close(); p.CutAll() })
	return p
}

// ProxyFor starts a proxy in front of env's server.
func ProxyFor(t testing.TB, env *Env) *Proxy {
	return NewProxy(t, net.JoinHostPort(env.Server.Host, strconv.Itoa(env.Server.Port)))
}

// Via returns env's DSN pointed at the proxy.
func (p *Proxy) Via(env *Env) string {
	return strings.Replace(env.DSN, net.JoinHostPort(env.Server.Host, strconv.Itoa(env.Server.Port)), p.Addr, 1)
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		down := p.down
		p.mu.Unlock()
		if down {
			c.Close()
			continue
		}
		p.mu.Lock()
		target, gen := p.target, p.gen
		p.mu.Unlock()
		s, err := net.Dial("tcp", target)
		if err != nil {
			c.Close()
			continue
		}
		// SetDown may have cut every registered connection while we were
		// dialling, or SetTarget switched servers: check again while
		// registering, or this one escapes (a client of the old server
		// after a simulated switchover).
		p.mu.Lock()
		if p.down || p.gen != gen {
			p.mu.Unlock()
			c.Close()
			s.Close()
			continue
		}
		p.conns[c] = s
		p.mu.Unlock()
		var muted atomic.Bool
		sc := &stmtCounter{n: &p.stmts}
		go p.pipeUp(c, s, &muted, sc)
		go p.pipeDown(c, s, &muted, sc)
	}
}

// isCommit reports whether chunk ends with a COMMIT message: PostgreSQL's
// simple query "commit" (pgx) or MySQL's COM_QUERY "COMMIT"
// (go-sql-driver); never a statement that merely mentions the word.
func isCommit(chunk []byte) bool {
	l := bytes.ToLower(chunk)
	return bytes.HasSuffix(l, []byte("q\x00\x00\x00\x0bcommit\x00")) ||
		bytes.HasSuffix(l, []byte("\x07\x00\x00\x00\x03commit"))
}

// pipeUp copies client -> server, watching for an armed COMMIT cut.
// pipeDown copies server -> client until the connection is muted.
func (p *Proxy) pipeDown(c, s net.Conn, muted *atomic.Bool, sc *stmtCounter) {
	defer c.Close()
	defer s.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := s.Read(buf)
		if n > 0 {
			sc.serverSpoke.Store(true) // MySQL's server speaks first
			if muted.Load() {
				return
			}
			if d := p.delay.Load(); d > 0 {
				time.Sleep(time.Duration(d))
			}
			p.waitStall()
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *Proxy) pipeUp(c, s net.Conn, muted *atomic.Bool, sc *stmtCounter) {
	defer func() {
		c.Close()
		s.Close()
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			chunk := buf[:n]
			sc.feed(chunk)
			p.mu.Lock()
			arm := p.arm
			isCommit := (arm != nil || p.rand != nil) && isCommit(chunk)
			if arm != nil && isCommit {
				p.arm = nil
			} else {
				arm = nil
			}
			mode, delay := 0, time.Duration(0)
			if rc := p.rand; rc != nil && isCommit && arm == nil && rc.rng.Float64() < rc.rate {
				mode = 1 + rc.rng.IntN(3)
				delay = time.Duration(rc.rng.Int64N(int64(rc.maxDelay) + 1))
				rc.cuts.Add(1)
			}
			p.mu.Unlock()
			if mode != 0 {
				muted.Store(true)
				c.Close() // the client hears nothing, at once
				switch mode {
				case 1: // COMMIT never arrives
				case 2: // COMMIT arrives now
					s.Write(chunk)
					time.Sleep(50 * time.Millisecond)
				case 3: // COMMIT is still in flight while the client verifies
					time.Sleep(delay)
					s.Write(chunk)
					time.Sleep(50 * time.Millisecond)
				}
				return
			}
			if arm != nil {
				muted.Store(true)
				if arm.forward {
					s.Write(chunk)
					time.Sleep(300 * time.Millisecond) // let the server commit
				}
				close(arm.fired)
				return // both sides closed: the client never hears the answer
			}
			p.waitStall()
			if _, werr := s.Write(chunk); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// Statements is how many statements clients sent through the proxy so
// far: PostgreSQL Query and Execute messages, MySQL COM_QUERY and
// COM_STMT_EXECUTE packets — what the server runs for them.
func (p *Proxy) Statements() int64 { return p.stmts.Load() }

// Conns is how many client connections are open through the proxy: the
// server connections of the clients that use it.
func (p *Proxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// stmtCounter follows one connection's client-to-server protocol stream
// and counts its statements.
type stmtCounter struct {
	serverSpoke atomic.Bool // before the client's first bytes: MySQL
	n           *atomic.Int64
	fed         bool
	mysql       bool
	buf         []byte
	started     bool // PostgreSQL: past the (untyped) startup message
}

func (sc *stmtCounter) feed(b []byte) {
	if !sc.fed {
		sc.fed, sc.mysql = true, sc.serverSpoke.Load()
	}
	sc.buf = append(sc.buf, b...)
	for {
		if sc.mysql {
			if len(sc.buf) < 4 {
				return
			}
			size := int(sc.buf[0]) | int(sc.buf[1])<<8 | int(sc.buf[2])<<16
			if len(sc.buf) < 4+size {
				return
			}
			if sc.buf[3] == 0 && size > 0 && (sc.buf[4] == 0x03 || sc.buf[4] == 0x17) {
				sc.n.Add(1) // a command (sequence 0): COM_QUERY, COM_STMT_EXECUTE
			}
			sc.buf = sc.buf[4+size:]
			continue
		}
		if !sc.started {
			if len(sc.buf) < 8 {
				return
			}
			size := int(sc.buf[0])<<24 | int(sc.buf[1])<<16 | int(sc.buf[2])<<8 | int(sc.buf[3])
			if len(sc.buf) < size {
				return
			}
			code := int(sc.buf[4])<<24 | int(sc.buf[5])<<16 | int(sc.buf[6])<<8 | int(sc.buf[7])
			if code != 80877103 && code != 80877104 { // not SSL/GSS negotiation
				sc.started = true
			}
			sc.buf = sc.buf[size:]
			continue
		}
		if len(sc.buf) < 5 {
			return
		}
		size := int(sc.buf[1])<<24 | int(sc.buf[2])<<16 | int(sc.buf[3])<<8 | int(sc.buf[4])
		if len(sc.buf) < 1+size {
			return
		}
		if sc.buf[0] == 'Q' || sc.buf[0] == 'E' {
			sc.n.Add(1)
		}
		sc.buf = sc.buf[1+size:]
	}
}

// waitStall holds the caller while the proxy is stalled.
func (p *Proxy) waitStall() {
	for p.stall.Load() {
		time.Sleep(2 * time.Millisecond)
	}
}

// SetStalled holds every byte in both directions (connections stay open,
// nothing arrives), like a replication link that stops moving, until
// SetStalled(false); a cut or a closed endpoint drops what was held.
func (p *Proxy) SetStalled(stalled bool) { p.stall.Store(stalled) }

// SetTarget sends new connections to addr ("host:port"); existing ones
// stay where they are (CutAll them to move everyone, like a floating IP).
func (p *Proxy) SetTarget(addr string) {
	p.mu.Lock()
	p.target = addr
	p.gen++
	p.mu.Unlock()
}

// ArmCommitCut makes the proxy cut the next connection that sends a COMMIT:
// with forward, the server receives the COMMIT (and commits) but the client
// never gets the reply; without, the COMMIT never arrives (the server rolls
// back when the connection closes). The returned channel closes when the
// cut happened.
func (p *Proxy) ArmCommitCut(forward bool) <-chan struct{} {
	cc := &commitCut{forward: forward, fired: make(chan struct{})}
	p.mu.Lock()
	p.arm = cc
	p.mu.Unlock()
	return cc.fired
}

// CutCommits makes the proxy cut a share rate (0..1) of every COMMIT that
// passes through it, on any connection, until CutCommits(0, 0). Each cut
// closes the client's side at once; the COMMIT then never reaches the
// server, reaches it at once, or reaches it after a random delay of up to
// maxDelay — the last is a COMMIT still in flight while the client already
// checks whether it happened. It returns a func reporting how many
// COMMITs were cut.
func (p *Proxy) CutCommits(rate float64, maxDelay time.Duration) func() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if rate <= 0 {
		p.rand = nil
		return func() int64 { return 0 }
	}
	rc := &randomCut{rate: rate, maxDelay: maxDelay, rng: rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))}
	p.rand = rc
	return rc.cuts.Load
}

// SetReplyDelay delays every server -> client write by d (0: none), as a
// slow network or an overloaded server's replies would be.
func (p *Proxy) SetReplyDelay(d time.Duration) { p.delay.Store(int64(d)) }

// SetDown makes the network "fail": existing connections are cut and new
// ones closed at once, until SetDown(false).
func (p *Proxy) SetDown(down bool) {
	p.mu.Lock()
	p.down = down
	p.mu.Unlock()
	if down {
		p.CutAll()
	}
}

// CutAll closes every proxied connection at once.
func (p *Proxy) CutAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c, s := range p.conns {
		c.Close()
		s.Close()
	}
}

// OpenVia starts a proxy in front of env's server and opens a pool through
// it (closed at the end of the test).
func OpenVia(t testing.TB, env *Env, opts ...sqlcoord.Options) (*Proxy, *sqlcoord.DB) {
	t.Helper()
	p := ProxyFor(t, env)
	db, err := sqlcoord.Open(context.Background(), p.Via(env), opts...)
	if err != nil {
		t.Fatalf("open through the proxy: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return p, db
}
