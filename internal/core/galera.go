package core

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/sqlcoord/sqlcoord/dialects"
	"github.com/sqlcoord/sqlcoord/internal/errs"
	"github.com/sqlcoord/sqlcoord/internal/keepalive"
)

// GaleraWriterLease is the coord_leases row a GaleraSingleWriter pool's
// node holds while its clients take row locks.
const GaleraWriterLease = "sqlcoord.galera.writer"

// GaleraWriter holds the writer lease (see galeraWriter).
type GaleraWriter = galeraWriter

// StartGaleraWriter: see startGaleraWriter.
func StartGaleraWriter(ctx context.Context, x dialects.Executor) (*GaleraWriter, error) {
	return startGaleraWriter(ctx, x)
}

// Check is nil while the node holds the writer lease.
func (w *galeraWriter) Check() error { return w.check() }

// Close stops renewing and releases the lease.
func (w *galeraWriter) Close() { w.close() }

// galeraWriterTTL is the writer lease's TTL; renewed every third of it.
const galeraWriterTTL = 10 * time.Second

// errWriterLost: a renewal found the writer lease no longer this node's.
var errWriterLost = errors.New("galera: the writer lease is no longer this node's")

// galeraWriter holds the writer lease for the node a pool reaches. The
// owner is the node's name, read from the server, so every client of one
// node shares the lease and a client of another node cannot take it while
// it is live. While it is held, the one renewal loop (internal/keepalive)
// keeps it, and locks are allowed while the loop's validity — counted from
// when the last grant or renewal was sent, less its margin — lasts, the
// way an etcd session's is; while another node holds it, the writer tries
// to take it every third of the TTL.
type galeraWriter struct {
	x      dialects.Executor // the pool's autocommit statements
	d      *dialects.Dialect
	node   string
	mu     sync.Mutex
	held   *keepalive.Loop // nil while not the writer
	token  int64
	holder string // when refused: the writer node
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once
}

// startGaleraWriter takes the writer lease for db's node, or fails with
// ErrGaleraLocks naming the node that holds it, and keeps renewing it
// until close (or until the pool is closed).
func startGaleraWriter(ctx context.Context, x dialects.Executor) (*galeraWriter, error) {
	w := &galeraWriter{x: x, d: dialects.Galera, stop: make(chan struct{}), done: make(chan struct{})}
	if err := x.QueryRow(ctx, dialects.GaleraNode).Scan(&w.node); err != nil {
		return nil, errs.Errorf("%w: %v", dialects.ErrUnreachable, err)
	}
	if err := w.acquire(ctx); err != nil {
		if !errors.Is(w.d.Classify(err), dialects.ErrNoSchema) {
			return nil, err
		}
		w.holder = "(none yet: the schema is not installed)" // Open for `migrate up`: taken from then on
	} else if err := w.check(); err != nil {
		return nil, err // another node's: nothing was started
	}
	go w.loop()
	return w, nil
}

// acquire takes the writer lease when it is free (or this node's), and
// starts keeping it.
func (w *galeraWriter) acquire(ctx context.Context) error {
	// A GaleraSingleWriter pool reads without causal waits, and a node
	// taking the lease may not have applied the previous writer's release
	// yet (its applier lags under load): without the wait a planned
	// switchover is refused for a lease that is already released. The
	// holder's renewals skip it (its own writes are local; a lagging
	// applier must not delay them).
	var one int
	if err := w.x.QueryRow(ctx, dialects.GaleraCatchUp).Scan(&one); err != nil {
		return errs.Errorf("galera: wait for this node to apply the cluster's writes: %w", w.d.Classify(err))
	}
	sent := time.Now()
	row, err := w.d.LeaseAcquire(ctx, w.x, dialects.LeaseSlot{Name: GaleraWriterLease, Owner: w.node, TTLMicros: galeraWriterTTL.Microseconds()})
	if err != nil {
		return err
	}
	if row.Owner != w.node {
		w.mu.Lock()
		w.holder = fmt.Sprintf("%s until %s", row.Owner, row.ExpiresAt.UTC().Format(time.RFC3339))
		w.mu.Unlock()
		return nil
	}
	slot := dialects.LeaseSlot{Name: GaleraWriterLease, Owner: w.node, Token: row.Token, TTLMicros: galeraWriterTTL.Microseconds()}
	l, err := keepalive.Start(context.Background(), sent, keepalive.Options{TTL: galeraWriterTTL,
		Renew: func(ctx context.Context) error {
			r, err := w.d.LeaseRenew(ctx, w.x, slot)
			if err == nil && !r.OK {
				return errWriterLost
			}
			return err
		},
		Lost: func(err error) bool { return errors.Is(err, errWriterLost) },
	})
	if err != nil {
		return err
	}
	w.mu.Lock()
	w.held, w.token, w.holder = l, row.Token, ""
	w.mu.Unlock()
	return nil
}

// loop keeps trying to take the lease while another node holds it (or
// this node's was lost), until close or until the application closes its
// pool.
func (w *galeraWriter) loop() {
	defer close(w.done)
	for {
		w.mu.Lock()
		held := w.held
		w.mu.Unlock()
		if held != nil {
			select {
			case <-w.stop:
				return
			case <-held.Done(): // lost, or validity ran out: take it again if free
				w.mu.Lock()
				w.held = nil
				w.mu.Unlock()
			}
			continue
		}
		select {
		case <-w.stop:
			return
		case <-time.After(galeraWriterTTL / 3):
		}
		ctx, cancel := context.WithTimeout(context.Background(), galeraWriterTTL/3)
		err := w.acquire(ctx)
		cancel()
		if err != nil && (errors.Is(err, sql.ErrConnDone) || strings.Contains(err.Error(), "database is closed")) {
			return // the application closed its pool
		}
	}
}

// check is nil while this node holds the writer lease.
func (w *galeraWriter) check() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.held != nil && w.held.Valid() {
		return nil
	}
	why := "this node's writer lease lapsed (renewals failed)"
	if w.holder != "" {
		why = "node " + w.holder + " is the single writer"
	}
	return errs.Errorf("%w: GaleraSingleWriter on node %s: %s", &dialects.Error{Kind: dialects.ErrGaleraLocks}, w.node, why)
}

// close stops renewing and releases the lease, so another node can take
// over at once (a planned switchover).
func (w *galeraWriter) close() { w.once.Do(w.release) }

func (w *galeraWriter) release() {
	close(w.stop)
	<-w.done
	w.mu.Lock()
	held, token := w.held, w.token
	w.held = nil
	w.mu.Unlock()
	if held == nil {
		return
	}
	valid := held.Valid()
	held.Stop()
	if valid {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		w.d.LeaseRelease(ctx, w.x, dialects.LeaseSlot{Name: GaleraWriterLease, Owner: w.node, Token: token})
	}
}

// galeraWriterOps are GaleraSingleWriter's operations with row locks
// taken only while this client's node holds the writer lease.
type galeraWriterOps struct {
	dialects.Operations
	writer func() error
}

func (o galeraWriterOps) LockTry(ctx context.Context, tx dialects.Executor, name string, names *dialects.LockNames) error {
	if err := o.writer(); err != nil {
		return err
	}
	return o.Operations.LockTry(ctx, tx, name, names)
}

func (o galeraWriterOps) LockWait(ctx context.Context, tx dialects.Executor, name string, wait time.Duration, names *dialects.LockNames) error {
	if err := o.writer(); err != nil {
		return err
	}
	return o.Operations.LockWait(ctx, tx, name, wait, names)
}

// galeraWriterDialect is GaleraSingleWriter whose locks first ask writer,
// which returns an error matching ErrGaleraLocks unless this client's
// node holds the cluster's writer lease.
func galeraWriterDialect(writer func() error) *dialects.Dialect {
	base := dialects.GaleraSingleWriter
	return dialects.Derive(base, base.Name(), galeraWriterOps{base.Operations(), writer})
}
