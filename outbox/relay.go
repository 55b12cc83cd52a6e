package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"github.com/sqlcoord/sqlcoord/internal/core"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sqlcoord/sqlcoord/internal/errs"
	"github.com/sqlcoord/sqlcoord/internal/tracing"
	"github.com/sqlcoord/sqlcoord/membership"
	"github.com/sqlcoord/sqlcoord/metrics"
	"github.com/sqlcoord/sqlcoord/outbox/internal/relayutil"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/dialects"
	"github.com/sqlcoord/sqlcoord/internal/backoff"
	"github.com/sqlcoord/sqlcoord/internal/redact"
)

// RelayOptions tune a Relay.
type RelayOptions struct {
	// BatchSize is how many messages one claim takes; default 100.
	BatchSize int
	// Ordered: a keyed message is not published while an older message
	// with the same key is still pending (failed messages block their key
	// until they succeed or are dead-lettered). Unkeyed messages are not
	// ordered. Cost: one message per key per claim, so a single hot key
	// moves at one message per batch round trip. "Older" means a smaller
	// id among committed messages: two producer transactions writing the
	// same key concurrently may commit out of id order, and the later id
	// can be published first; producers that need strict per-key order
	// serialise their writes per key (e.g. lock the aggregate's row).
	Ordered bool
	// DeleteOnPublish deletes rows instead of marking them published.
	DeleteOnPublish bool
	// Topics, if set, is the relay's topic filter: it claims only messages
	// of these topics (a relay group per set of topics, e.g. a slow
	// publisher's topics apart from the rest). Every topic needs a group
	// whose filter includes it (or one without a filter), or its messages
	// stay pending. With Ordered, a key's older message in another group's
	// topic still goes first. At most 64 topics, each non-empty UTF-8
	// without NUL, at most 255 bytes.
	Topics []string
	// MaxAttempts before a message is dead-lettered; default 10.
	MaxAttempts int
	// BaseBackoff, MaxBackoff: retry n waits a random time in
	// [d/2, d], d = min(MaxBackoff, BaseBackoff·2ⁿ⁻¹); defaults 1s, 5m.
	BaseBackoff, MaxBackoff time.Duration
	// PollMin, PollMax bound the adaptive polling interval (it doubles on
	// each empty poll, resets after a busy one); defaults 50ms, 2s.
	PollMin, PollMax time.Duration
	// PollBusy is the pause after a batch that found messages while the
	// relay stays awake — no NOTIFY will wake it: MySQL/MariaDB, LISTEN off
	// or lost, or messages arriving faster than SleepBelow; messages are
	// probably still arriving. Default 2ms (on MariaDB the pause ends
	// early when the newest producer commits). Empty polls then back off
	// from it, doubling up to PollMax.
	PollBusy time.Duration
	// SleepBelow (PostgreSQL, while the relay listens): the rate of new
	// messages, per second, below which the relay sleeps right after a
	// batch — producers then send a NOTIFY and the next message is
	// delivered on its commit. At higher rates it polls every PollBusy and
	// producers send none (a NOTIFY serialises the commits of notifying
	// transactions). Default 250; negative: sleep only after empty polls
	// backed off to PollMin.
	SleepBelow int
	// PublishConcurrency bounds how many topics of a batch are published
	// at once (default 8; 1: one topic after the other). Messages of one
	// topic go one after the other, in id order; after a failed publish
	// (not a permanent one) the topic's remaining messages in the batch are
	// left pending, unattempted, for a later batch — so a slow or failing
	// topic costs at most one PublishTimeout per batch and never holds up
	// the other topics' publishes.
	PublishConcurrency int
	// Listen (PostgreSQL): whether the relay also wakes on the NOTIFY that
	// Enqueue sends, on a dedicated connection (polling always runs too):
	//   - ListenAuto (the default): listen after proving, with a probe
	//     NOTIFY from another connection, that notifications arrive;
	//     when they do not (PgBouncer in transaction mode: LISTEN
	//     "succeeds" on a server connection the bouncer then lends to
	//     others) the relay logs why at Warn and only polls. MySQL and
	//     MariaDB have no LISTEN: the relay polls (logged at Info).
	//   - ListenOn: listen without the probe; refused where the driver
	//     cannot listen (MySQL/MariaDB) unless Listener is set.
	//   - ListenOff: poll only.
	Listen ListenMode
	// Listener, if set, is where the relay listens instead of its
	// database — e.g. pgxv5.NewDSNListener with a direct DSN when the
	// application's pool goes through PgBouncer.
	Listener sqlcoord.Listener
	// PublishTimeout bounds one publish; default 30s.
	PublishTimeout time.Duration
	// FrozenTimeout (PostgreSQL) bounds how long a relay frozen in the
	// middle of a batch (SIGSTOP, a hung host) keeps the claimed rows: the
	// batch transaction's idle_in_transaction_session_timeout (SET LOCAL),
	// after which the server ends the session and the other relays publish
	// the batch (again, if it was partly published: at least once). A live
	// relay runs a trivial statement every FrozenTimeout/3 while it
	// publishes, so long publishing never trips it. Default 2 minutes.
	// MySQL/MariaDB: put idle_transaction_timeout (MariaDB) / wait_timeout
	// in the relay's DSN instead.
	FrozenTimeout time.Duration
	// ShutdownTimeout: after ctx ends, the batch in flight is finished
	// (published and marked) within this time, or rolled back so other
	// relays take it; default 10s.
	ShutdownTimeout time.Duration
	// Logger gets the relay's warnings (default: stderr, warnings only).
	// Its metrics go to the driver's Recorder (sqlcoord.Options.Metrics);
	// the outbox gauges are metrics/prom.NewOutboxCollector's.
	Logger *slog.Logger
}

// ListenMode is RelayOptions.Listen: "auto" (also ""), "on" or "off".
type ListenMode string

// Listen modes; see RelayOptions.Listen.
const (
	ListenAuto ListenMode = "auto"
	ListenOn   ListenMode = "on"
	ListenOff  ListenMode = "off"
)

// Relay moves committed outbox messages to a Publisher.
type Relay struct {
	db        sqlcoord.Base
	pub       Publisher
	opt       RelayOptions
	log       *slog.Logger
	rec       metrics.Recorder
	listening atomic.Bool  // notifications wake the relay
	newest    atomic.Int64 // the newest outbox id waitCommit has seen
	// beforeSleep, in tests, runs between the relay's last empty poll and
	// its taking the sleep lock.
	beforeSleep func()
	// sleepLife: a sleep transaction is ended (and taken anew) once it is
	// older than this, so that none looks stuck to monitoring; 1 minute.
	sleepLife time.Duration
	// claimQ/claimOrderedQ: the claims, reading commit times when the
	// server records them (decided on the first batch).
	claimOnce             sync.Once
	claimQ, claimOrderedQ string
	claimArgs             func(n int) []any // the claim's arguments (the topic filter's)
	idleFolded            bool              // the claims set FrozenTimeout themselves

	health HealthLog
}

// Health is how the relay's batches have been going.
type Health struct {
	LastBatch time.Time // when the last batch ended (zero: none yet)
	LastOK    time.Time // when a batch last succeeded
	// Failing counts the batches that failed in a row since the last one
	// that succeeded (a database error: nothing was claimed or marked).
	// A message its publisher refused is not a failed batch: it is
	// retried and dead-lettered on its own.
	Failing   int
	LastError string // the last failed batch's error, redacted ("" after a success)
}

// OK: no batch has failed since the last one that succeeded.
func (h Health) OK() bool { return h.Failing == 0 }

// Health reports the outcome of the relay's batches so far (a health
// endpoint fails while batches fail).
func (r *Relay) Health() Health { return r.health.Get() }

func (r *Relay) recordBatch(err error) { r.health.Record(err) }

// HealthLog keeps a relay's Health; safe for concurrent use. The zero
// value is ready (no batch yet).
type HealthLog struct {
	mu sync.Mutex
	h  Health
}

// Get is the Health recorded so far.
func (l *HealthLog) Get() Health {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.h
}

// Record notes a batch that ended with err (nil: it succeeded).
func (l *HealthLog) Record(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	l.h.LastBatch = now
	if err != nil {
		l.h.Failing++
		l.h.LastError = redact.Text(err.Error())
		return
	}
	l.h.Failing, l.h.LastError, l.h.LastOK = 0, "", now
}

// NewRelay returns a relay for db publishing to pub.
func NewRelay(db sqlcoord.Base, pub Publisher, opt RelayOptions) (*Relay, error) {
	if pub == nil {
		return nil, errs.Errorf("%w: relay needs a publisher", ErrInvalid)
	}
	if opt.BatchSize == 0 {
		opt.BatchSize = 100
	}
	if opt.BatchSize < 0 || opt.BatchSize > 10000 || opt.MaxAttempts < 0 {
		return nil, errs.Errorf("%w: batch size 1-10000 and max attempts >= 0", ErrInvalid)
	}
	if opt.MaxAttempts == 0 {
		opt.MaxAttempts = 10
	}
	if opt.PublishConcurrency == 0 {
		opt.PublishConcurrency = 8
	}
	if opt.PublishConcurrency < 0 || opt.PublishConcurrency > 1024 {
		return nil, errs.Errorf("%w: publish concurrency %d: want 1 to 1024", ErrInvalid, opt.PublishConcurrency)
	}
	topics, err := relayutil.Topics(ErrInvalid, opt.Topics)
	if err != nil {
		return nil, err
	}
	opt.Topics = topics
	if opt.Listen == "" {
		opt.Listen = ListenAuto
	}
	if opt.Listener == nil {
		opt.Listener, _ = db.(sqlcoord.Listener)
	}
	switch opt.Listen {
	case ListenAuto, ListenOff:
	case ListenOn:
		if opt.Listener == nil {
			return nil, errs.Errorf("%w: listen mode on: %s cannot listen (use auto or off, or give a Listener)", ErrInvalid, db)
		}
		if err := opt.Listener.CanListen(); err != nil {
			return nil, errs.Errorf("%w: listen mode on: %w (use auto or off, or give a Listener)", ErrInvalid, err)
		}
	default:
		return nil, errs.Errorf("%w: listen mode %q (want auto, on or off)", ErrInvalid, opt.Listen)
	}
	if err := relayutil.Durations(ErrInvalid,
		relayutil.D("BaseBackoff", &opt.BaseBackoff, time.Second),
		relayutil.D("MaxBackoff", &opt.MaxBackoff, 5*time.Minute),
		relayutil.D("PollMin", &opt.PollMin, 50*time.Millisecond),
		relayutil.D("PollMax", &opt.PollMax, 2*time.Second),
		relayutil.D("FrozenTimeout", &opt.FrozenTimeout, 2*time.Minute),
		relayutil.D("PollBusy", &opt.PollBusy, 2*time.Millisecond),
		relayutil.D("PublishTimeout", &opt.PublishTimeout, 30*time.Second),
		relayutil.D("ShutdownTimeout", &opt.ShutdownTimeout, 10*time.Second)); err != nil {
		return nil, err
	}
	if opt.SleepBelow == 0 {
		opt.SleepBelow = 250
	}
	r := &Relay{db: db, pub: pub, opt: opt, log: relayutil.Logger(opt.Logger), sleepLife: time.Minute}
	r.rec = metrics.Of(db)
	return r, nil
}

// Run relays until ctx ends (then it returns nil). Database errors (a
// restart, a cut connection) are logged and retried; the relay resumes
// when the database is back. Conditions retrying cannot fix end Run with
// an error matching sqlcoord.ErrNoSchema, sqlcoord.ErrReadOnly or
// sqlcoord.ErrAccessDenied.
func (r *Relay) Run(ctx context.Context) error {
	wake := make(chan struct{}, 1)
	if r.opt.Listener != nil && r.opt.Listen != ListenOff {
		var lwg sync.WaitGroup
		lctx, stopListen := context.WithCancel(ctx)
		lwg.Add(1)
		go func() { defer lwg.Done(); r.listen(lctx, r.opt.Listener, wake) }()
		defer lwg.Wait()   // it leaves the listeners' group before Run returns,
		defer stopListen() // however Run ends (a fatal error too)
	}
	// The relay is awake (polling; producers do not notify) or, on
	// PostgreSQL while it listens, asleep: it holds the sleep lock in a
	// transaction it keeps open (producers then notify) and has the next
	// batch's transaction begun, so that when a NOTIFY (or the interval)
	// wakes it the claim is its next statement; as soon as the claim
	// returns messages the sleep lock is released (beside the publish), so
	// a slow publish never makes producers notify. It falls asleep after
	// empty polls backed the interval off to PollMin, or right after a
	// batch while messages arrive slower than SleepBelow. Under load it
	// never sleeps, so producers never pay for a NOTIFY.
	var sleep dialects.OwnedTx // holds the sleep lock
	var pre dialects.OwnedTx   // the next batch's transaction, begun while asleep
	var sleepSince, otherSleeps time.Time
	var releasing sync.WaitGroup // sleep transactions being ended
	wakeUp := func() {
		// ended beside the batch (not before its claim): the woken relay
		// claims at once, and producers stop notifying a moment later
		if tx := sleep; tx != nil {
			sleep = nil
			releasing.Add(1)
			go func() { defer releasing.Done(); releaseSleep(ctx, tx) }()
		}
	}
	endPre := func() {
		if pre != nil {
			releaseSleep(ctx, pre)
			pre = nil
		}
	}
	defer func() {
		wakeUp()
		releasing.Wait()
		endPre()
	}()
	busy := min(r.opt.PollBusy, r.opt.PollMin) // the pause after a batch that found messages
	var interval time.Duration                 // the first empty poll waits busy, then it doubles
	var arrivals arrivalRate
	for {
		n, open, err := r.poll(ctx, pre, wakeUp)
		if !open {
			pre = nil // the batch ended it (or it failed)
		}
		if err != nil {
			wakeUp()
		}
		if ctx.Err() != nil {
			return nil
		}
		rate := arrivals.observe(time.Now(), r.newest.Load(), n)
		switch {
		case err != nil && sqlcoord.Fatal(err):
			r.log.Error("relay stopping", "err", redact.Text(err.Error()))
			return errs.Errorf("outbox: relay stopped: %w", err)
		case err != nil:
			r.log.Warn("relay batch failed", "err", redact.Text(err.Error()))
			interval = r.opt.PollMax
		case n >= r.opt.BatchSize:
			interval = 0 // more waiting: go again at once
		case n > 0:
			interval = busy
		default:
			interval = min(max(interval*2, busy), r.opt.PollMax)
		}
		if interval == 0 {
			continue
		}
		// Sleep after polls found nothing for PollMin, or right after a
		// batch while messages arrive slower than SleepBelow: a NOTIFY
		// then costs producers little, and the next message is delivered
		// on its commit instead of at the next poll (not while another
		// relay sleeps: producers notify already).
		idle := n == 0 && interval >= r.opt.PollMin
		slow := n > 0 && r.opt.SleepBelow > 0 && rate < float64(r.opt.SleepBelow) && time.Since(otherSleeps) > r.opt.PollMin
		if sleep == nil && err == nil && (idle || slow) && r.listening.Load() {
			if r.beforeSleep != nil {
				r.beforeSleep()
			}
			releasing.Wait() // one sleep transaction at a time
			var other bool
			if sleep, other = r.fallAsleep(ctx); sleep != nil {
				sleepSince = time.Now()
				if pre == nil {
					// not ended by ctx: it becomes a batch's transaction,
					// which a graceful shutdown finishes
					// (on an error pre stays nil and the batch begins its
					// own, reporting it: a failed BeginOwned's value holds
					// no transaction, and rolling it back panicked)
					if tx, err := core.Owned(context.WithoutCancel(ctx), r.db, &sql.TxOptions{Isolation: sql.LevelReadCommitted}); err == nil {
						pre = tx
					}
				}
				continue // poll once more: messages committed by producers that did not notify
			}
			if other {
				otherSleeps = time.Now()
			} else {
				// producers in the middle of a transaction kept the lock:
				// they will not notify; try again soon
				interval = min(interval, r.opt.PollMin)
			}
		}
		if sleep != nil && !r.listening.Load() {
			wakeUp() // LISTEN lost: producers' NOTIFYs would not reach it
			endPre()
		}
		if !r.listening.Load() && r.db.Dialect().Q().OutboxWaitCommit != "" {
			if r.waitCommit(ctx, interval) {
				interval = busy
			}
			continue
		}
		if sleep != nil {
			interval = max(interval, r.opt.PollMin) // a NOTIFY wakes it; this is the safety net
		}
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-wake:
			interval = busy
		case <-t.C:
			if sleep != nil && time.Since(sleepSince) > r.sleepLife {
				wakeUp() // a sleep transaction lasts a minute at most: none looks stuck
				endPre()
			}
		}
		t.Stop()
	}
}

// arrivalRate estimates how fast messages arrive in the outbox (all
// relays' batches together): from the growth of the newest outbox id the
// relay has claimed, smoothed over about 100 ms.
type arrivalRate struct {
	at     time.Time
	newest int64
	rate   float64 // messages per second
}

// observe records a poll at now that found n messages, the newest id
// claimed so far being newest, and returns the estimate.
func (a *arrivalRate) observe(now time.Time, newest int64, n int) float64 {
	if a.at.IsZero() {
		a.at, a.newest = now, newest
		return 0
	}
	dt := now.Sub(a.at).Seconds()
	if dt <= 0 {
		return a.rate
	}
	grew := float64(n)
	if a.newest > 0 && newest > a.newest {
		grew = max(grew, float64(newest-a.newest)) // other relays' messages too
	}
	w := 1 - math.Exp(-dt/0.1)
	a.rate += w * (grew/dt - a.rate)
	a.at, a.newest = now, newest
	return a.rate
}

// waitCommit (MariaDB) is the relay's pause between polls: it waits up to
// d for the producer inserting the newest outbox row to commit, and
// returns true as soon as it does (or at once when a row newer than any
// seen is committed already); false when d passed or the wait failed.
// Producers pay nothing (the locking read at READ COMMITTED takes no gap
// lock); one in a long transaction makes the relay wait for it or d,
// whichever is first, as polling would. MySQL 8 (no max_statement_time
// per statement) polls.
func (r *Relay) waitCommit(ctx context.Context, d time.Duration) bool {
	until := time.Now().Add(d)
	sleep := func() { backoff.Sleep(ctx, time.Until(until)) } // the rest of d, or until ctx ends
	tx, err := core.Owned(ctx, r.db, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		sleep()
		return false
	}
	var id int64
	err = tx.QueryRow(ctx, fmt.Sprintf(r.db.Dialect().Q().OutboxWaitCommit, strconv.FormatFloat(d.Seconds(), 'f', 6, 64))).Scan(&id)
	tx.Rollback(context.WithoutCancel(ctx))
	switch {
	case err == nil && id > r.newest.Load():
		r.newest.Store(id) // a commit (or one from before): poll now
		return true
	case err == nil || errors.Is(err, sql.ErrNoRows): // nothing newer, nothing in flight
		sleep()
	case ctx.Err() != nil:
	default: // max_statement_time: d has passed, or the wait failed
		sleep()
	}
	return false
}

// fallAsleep takes the sleep lock (PostgreSQL) in a transaction the relay
// keeps open while it waits: from then on producers send NOTIFY. It waits
// up to 50 ms for producers that saw no sleeping relay to commit; nil when
// it could not, with other true when another relay sleeps (producers
// notify already) and false when producers' open transactions hold it.
func (r *Relay) fallAsleep(ctx context.Context) (tx dialects.OwnedTx, other bool) {
	q := r.db.Dialect().Q()
	if q.OutboxSleep == "" {
		return nil, false
	}
	tx, err := core.Owned(ctx, r.db, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return nil, false
	}
	// Not cancelled with ctx (the lock wait is bounded by the settings'
	// lock_timeout): a statement cancelled mid-way closes its connection,
	// and the server would hold the lock — producers notifying — until it
	// noticed, after Run had returned.
	sctx := context.WithoutCancel(ctx)
	if err = r.sleepSettings(sctx, tx); err == nil {
		_, err = tx.Exec(sctx, q.OutboxSleep)
	}
	if err != nil {
		releaseSleep(ctx, tx)
		r.db.Executor().QueryRow(ctx, q.OutboxSleeper).Scan(&other)
		return nil, other
	}
	return tx, false
}

// sleepSettings sets a sleep transaction's lock_timeout (how long taking
// the sleep lock waits for producers) and idle timeout (a relay frozen
// while asleep releases it).
func (r *Relay) sleepSettings(ctx context.Context, tx dialects.OwnedTx) error {
	idle := fmt.Sprintf("%dms", r.sleepIdle().Milliseconds())
	_, err := tx.Exec(ctx, r.db.Dialect().Q().OutboxSleepSettings, "50ms", idle)
	return err
}

// sleepIdle bounds how long the server keeps a sleeping relay's idle
// transactions (the sleep lock's, the next batch's) when the relay is
// frozen: a live one uses them well within it.
func (r *Relay) sleepIdle() time.Duration { return 3*r.opt.PollMax + 10*time.Second }

// releaseSleep rolls back a sleeping relay's transaction (the sleep
// lock's, releasing it, or the next batch's), even after ctx ended.
func releaseSleep(ctx context.Context, tx dialects.OwnedTx) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	tx.Rollback(rctx)
}

// listen wakes the relay on NOTIFY coord_outbox, reconnecting as needed;
// it gives up (polling only) where LISTEN is not available.
func (r *Relay) listen(ctx context.Context, l sqlcoord.Listener, wake chan<- struct{}) {
	// listening from the moment LISTEN is in effect: only then may the
	// relay sleep (rely on a NOTIFY)
	opt := sqlcoord.ListenOptions{Probe: r.opt.Listen == ListenAuto, Ready: func() {
		r.listening.Store(true)
		select { // the loop may fall asleep now
		case wake <- struct{}{}:
		default:
		}
	}}
	defer r.listening.Store(false)
	for ctx.Err() == nil {
		// Producers send NOTIFY only while a listening relay is a live
		// member of this group (see dialects.OutboxListeners).
		var m *membership.Membership
		if l.CanListen() == nil {
			var jerr error
			if m, jerr = membership.Join(ctx, r.db, dialects.OutboxListeners, membership.Options{TTL: 10 * time.Second}); jerr != nil {
				r.log.Warn("outbox listen: cannot register as a listener; producers will not notify", "err", redact.Text(jerr.Error()))
			}
		}
		err := l.Listen(ctx, "coord_outbox", opt, func() {
			r.listening.Store(true)
			select {
			case wake <- struct{}{}:
			default:
			}
		})
		r.listening.Store(false)
		if m != nil {
			lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			m.Leave(lctx)
			cancel()
		}
		switch {
		case errors.Is(err, sqlcoord.ErrNotificationLost):
			r.log.Warn("outbox listen off; polling only", "reason", redact.Text(err.Error()))
			return
		case errors.Is(err, sqlcoord.ErrListenUnsupported):
			r.log.Info("outbox listen off; polling only", "reason", redact.Text(err.Error()))
			return
		}
		if ctx.Err() == nil {
			r.log.Warn("outbox listen", "err", redact.Text(fmt.Sprint(err)))
			backoff.Sleep(ctx, time.Second)
		}
	}
}

// Once claims one batch, publishes it and marks the outcome, in one
// transaction. It returns how many messages it claimed.
func (r *Relay) Once(ctx context.Context) (int, error) {
	n, _, err := r.poll(ctx, nil, nil)
	return n, err
}

// poll is Once in pre, a transaction begun ahead, when not nil (see
// batch); open reports whether pre is still open.
func (r *Relay) poll(ctx context.Context, pre dialects.OwnedTx, claimed func()) (n int, open bool, err error) {
	if ctx.Err() != nil {
		return 0, pre != nil, nil
	}
	n, open, err = r.batch(ctx, pre, claimed)
	if err != nil && ctx.Err() != nil {
		return n, open, err // stopped, not failed
	}
	r.recordBatch(err)
	return n, open, err
}

// batch claims one batch, publishes it and marks the outcome, in one
// transaction: a new one, or pre — begun ahead while the relay sleeps
// (PostgreSQL), so that a woken relay's claim is its next statement. A
// batch that claims messages, or fails, ends pre; an empty claim leaves it
// open (open true), its idle timeout back to a sleeper's. claimed, if set,
// runs as soon as the claim returned messages, before they are published.
func (r *Relay) batch(ctx context.Context, pre dialects.OwnedTx, claimed func()) (int, bool, error) {
	// The batch is finished even if ctx ends meanwhile (graceful
	// shutdown), within ShutdownTimeout; after that it is abandoned and
	// rolled back, and other relays take it.
	dctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	stop := context.AfterFunc(ctx, func() { time.AfterFunc(r.opt.ShutdownTimeout, cancel) })
	defer stop()

	d := r.db.Dialect()
	r.claimOnce.Do(func() {
		r.claimQ, r.claimOrderedQ = claimQueries(dctx, r.db)
		r.claimQ, r.claimArgs = d.WithTopics(r.claimQ, r.opt.Topics)
		r.claimOrderedQ, _ = d.WithTopics(r.claimOrderedQ, r.opt.Topics)
		r.claimQ, r.idleFolded = d.WithIdleTimeout(r.claimQ, r.opt.FrozenTimeout.Milliseconds())
		r.claimOrderedQ, _ = d.WithIdleTimeout(r.claimOrderedQ, r.opt.FrozenTimeout.Milliseconds())
	})
	q := r.claimQ
	if r.opt.Ordered {
		q = r.claimOrderedQ
	}
	// READ COMMITTED: under InnoDB's REPEATABLE READ the claim's locking
	// read takes next-key (gap) locks, and two relays marking rows of
	// overlapping ranges deadlock on the secondary index (state changes),
	// rolling back a batch that was already published. Read committed takes
	// record locks only, and the ordered claim's subquery sees the latest
	// committed state. (PostgreSQL's default already.)
	tx := pre
	if tx == nil {
		var err error
		if tx, err = core.Owned(dctx, r.db, &sql.TxOptions{Isolation: sql.LevelReadCommitted}); err != nil {
			return 0, false, errs.Errorf("outbox: begin: %w", d.Classify(err))
		}
	}
	keep := false // pre stays open: nothing claimed
	defer func() {
		if !keep {
			tx.Rollback(context.WithoutCancel(dctx))
		}
	}()
	guard, err := guardFrozen(dctx, d, tx, r.opt.FrozenTimeout, r.idleFolded)
	if err != nil {
		return 0, false, err
	}
	msgs, err := claim(dctx, tx, q, r.claimArgs(r.opt.BatchSize)...)
	if err != nil {
		return 0, false, errs.Errorf("outbox: claim: %w", d.Classify(err))
	}
	if len(msgs) == 0 {
		if pre == nil {
			return 0, false, tx.Commit(dctx)
		}
		if _, err := d.TxIdleTimeout(dctx, tx, r.sleepIdle().Milliseconds()); err != nil {
			return 0, false, errs.Errorf("outbox: idle timeout: %w", d.Classify(err))
		}
		keep = true
		return 0, true, nil
	}
	if claimed != nil {
		claimed()
	}
	if last := msgs[len(msgs)-1].ID; last > r.newest.Load() {
		r.newest.Store(last) // waitCommit waits for newer rows than these
	}
	var published []int64 // marked together, in one statement, before the commit
	var ok []Message
	bctx, endBatch := tracing.Start(dctx, r.db, "outbox.relay.batch", d, attribute.Int("sqlcoord.messages", len(msgs)))
	var batchErr error
	defer func() { endBatch(batchErr) }()
	stopBeat := guard()
	results := r.publishAll(ctx, dctx, bctx, msgs)
	stopBeat()
	skipped := 0
	for i, m := range msgs {
		perr := results[i]
		if perr == errSkipped {
			skipped++
			continue
		}
		if perr == nil {
			published = append(published, m.ID)
			ok = append(ok, m)
			continue
		}
		if r.isLast(m, perr) {
			if err := r.deadLetter(dctx, tx, m, perr); err != nil {
				return 0, false, err
			}
			continue
		}
		// Stored and logged without URL credentials, as valid UTF-8.
		msg := relayutil.StoredError(perr)
		r.rec.OutboxPublish(m.Topic, "retry", 0)
		r.log.Debug("publish failed; will retry", "id", m.ID, "topic", m.Topic, "attempt", m.Attempt, "err", msg)
		if _, err := tx.Exec(dctx, d.Q().OutboxFailed, msg, r.retryDelay(m.Attempt).Microseconds(), r.opt.MaxAttempts, m.ID); err != nil {
			return 0, false, errs.Errorf("outbox: record failure %d: %w", m.ID, d.Classify(err))
		}
	}
	if skipped > 0 {
		r.log.Debug("messages left for a later batch", "count", skipped)
	}
	if err := d.OutboxMark(dctx, tx, published, r.opt.DeleteOnPublish); err != nil {
		batchErr = errs.Errorf("outbox: mark %d published: %w", len(published), d.Classify(err))
		return 0, false, batchErr
	}
	if err := tx.Commit(dctx); err != nil {
		// the messages were published; they will be published again
		batchErr = errs.Errorf("outbox: commit: %w", d.ClassifyCommit(err))
		return 0, false, batchErr
	}
	for _, m := range ok {
		r.rec.OutboxPublish(m.Topic, "ok", time.Since(m.CreatedAt))
	}
	return len(msgs) - skipped, false, nil
}

// isLast: the failed publish perr of m ends it — a permanent error, or
// its last attempt.
func (r *Relay) isLast(m Message, perr error) bool {
	return IsPermanent(perr) || m.Attempt >= r.opt.MaxAttempts
}

// deadLetter records in tx that m will not be published: perr stored
// without URL credentials, as valid UTF-8, and logged.
func (r *Relay) deadLetter(ctx context.Context, tx dialects.Executor, m Message, perr error) error {
	msg := relayutil.StoredError(perr)
	r.rec.OutboxPublish(m.Topic, "dead", 0)
	r.log.Warn("message dead-lettered", "id", m.ID, "topic", m.Topic, "attempt", m.Attempt, "err", msg)
	if _, err := tx.Exec(ctx, r.db.Dialect().Q().OutboxDead, msg, m.ID); err != nil {
		return errs.Errorf("outbox: dead-letter %d: %w", m.ID, r.db.Dialect().Classify(err))
	}
	return nil
}

// retryDelay is the wait after failed attempt n: random in [d/2, d],
// d = min(MaxBackoff, BaseBackoff·2ⁿ⁻¹).
func (r *Relay) retryDelay(n int) time.Duration {
	return backoff.Policy{Base: r.opt.BaseBackoff, Max: r.opt.MaxBackoff, Jitter: backoff.Equal}.Delay(n - 1)
}

// guardFrozen bounds how long tx survives its relay being frozen
// (SIGSTOP, a hung host) in the middle of a batch: the server ends a
// session idle in tx for timeout (PostgreSQL's
// idle_in_transaction_session_timeout, SET LOCAL), which releases the
// claimed rows to the other relays. The returned beat keeps a live relay's
// tx from counting as idle while it publishes (call it before
// publishing, and the stop it returns after); only a frozen one goes
// silent. Where the server has no such setting (MySQL/MariaDB), beat does
// nothing. inClaim: the claim sets the timeout (no statement here).
func guardFrozen(ctx context.Context, d *dialects.Dialect, tx dialects.OwnedTx, timeout time.Duration, inClaim bool) (beat func() (stop func()), err error) {
	bounded := inClaim // set by the claim (dialects.WithIdleTimeout)
	if !inClaim {
		if bounded, err = d.TxIdleTimeout(ctx, tx, timeout.Milliseconds()); err != nil {
			return nil, errs.Errorf("outbox: idle timeout: %w", d.Classify(err))
		}
	}
	return func() func() {
		if !bounded {
			return func() {}
		}
		return keepTxAwake(ctx, tx, d.Q().Now, timeout/3)
	}, nil
}

// keepTxAwake runs a trivial statement in tx every interval until the
// returned stop is called (and waits for it to finish): the transaction
// is never idle for a whole interval while this process runs.
func keepTxAwake(ctx context.Context, tx dialects.OwnedTx, q string, every time.Duration) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				var now time.Time
				tx.QueryRow(ctx, q).Scan(&now)
			}
		}
	}()
	return func() { close(quit); <-done }
}

// errSkipped marks a message left unattempted: its topic failed earlier
// in the batch, or the relay is stopping.
var errSkipped = errors.New("outbox: not attempted")

// publishAll publishes a batch: topics concurrently (at most
// PublishConcurrency at once), each topic's messages in order. After a
// failed publish (not a permanent one) a topic's later messages are
// skipped; once ctx (the relay's) ends no new publish starts — the ones in
// flight finish under dctx and their outcome is still recorded. The
// result for msgs[i] is results[i].
func (r *Relay) publishAll(ctx, dctx, bctx context.Context, msgs []Message) []error {
	results := make([]error, len(msgs))
	var topics []string
	byTopic := map[string][]int{}
	for i, m := range msgs {
		if _, seen := byTopic[m.Topic]; !seen {
			topics = append(topics, m.Topic)
		}
		byTopic[m.Topic] = append(byTopic[m.Topic], i)
	}
	sem := make(chan struct{}, r.opt.PublishConcurrency)
	var wg sync.WaitGroup
	for _, topic := range topics {
		idx := byTopic[topic]
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			failed := false
			for _, i := range idx {
				if failed || ctx.Err() != nil {
					results[i] = errSkipped
					continue
				}
				pctx, pc := context.WithTimeout(dctx, r.opt.PublishTimeout)
				err := r.publish(pctx, bctx, msgs[i])
				pc()
				results[i] = err
				failed = err != nil && !IsPermanent(err)
			}
		}()
	}
	wg.Wait()
	return results
}

// publish hands m to the publisher in a span of m's own trace (the
// traceparent Enqueue put in its headers), linked to the relay's batch span
// in bctx; without tracing it just publishes.
func (r *Relay) publish(ctx, bctx context.Context, m Message) (err error) {
	if tracing.On(r.db) {
		batch := trace.SpanContextFromContext(bctx)
		ctx = propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier(m.Headers))
		var end func(error)
		ctx, end = tracing.StartLinked(ctx, r.db, "outbox.publish", r.db.Dialect(), batch,
			attribute.String("messaging.destination.name", m.Topic), attribute.String("messaging.message.id", m.MessageID()),
			attribute.Int("sqlcoord.attempt", m.Attempt))
		defer func() { end(err) }()
	}
	return r.pub.Publish(ctx, m)
}

// claimQueries picks the claim statements: with commit times when the
// server records them (PostgreSQL's track_commit_timestamp), so that
// commit→publish is measured from the commit, else from the INSERT.
func claimQueries(ctx context.Context, db sqlcoord.Base) (string, string) {
	d := db.Dialect()
	if d.Q().OutboxCommitTSOn != "" {
		var on bool
		if err := db.Executor().QueryRow(ctx, d.Q().OutboxCommitTSOn).Scan(&on); err == nil && on {
			return d.Q().OutboxClaimCommitTS, d.Q().OutboxClaimOrderedCommitTS
		}
	}
	return d.Q().OutboxClaim, d.Q().OutboxClaimOrdered
}

func claim(ctx context.Context, tx dialects.Executor, q string, args ...any) ([]Message, error) {
	rows, err := tx.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Message
	for rows.Next() {
		var m Message
		var key sql.NullString
		var headers string
		if err := rows.Scan(&m.ID, &m.UUID, &m.Topic, &key, &m.Payload, &headers, &m.CreatedAt, &m.Attempt); err != nil {
			return nil, err
		}
		m.Key = key.String
		m.Attempt++
		if m.Headers, err = relayutil.ParseHeaders(headers); err != nil {
			return nil, errs.Errorf("headers of %d: %w", m.ID, err)
		}
		out = append(out, m)
	}
	return out, rows.Err()
}
