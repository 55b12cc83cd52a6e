package pgstream

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"go.opentelemetry.io/otel/attribute"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/coord"
	"github.com/sqlcoord/sqlcoord/dialects"
	"github.com/sqlcoord/sqlcoord/internal/backoff"
	"github.com/sqlcoord/sqlcoord/internal/core"
	"github.com/sqlcoord/sqlcoord/internal/errs"
	"github.com/sqlcoord/sqlcoord/internal/redact"
	"github.com/sqlcoord/sqlcoord/internal/tracing"
	"github.com/sqlcoord/sqlcoord/metrics"
	"github.com/sqlcoord/sqlcoord/outbox"
	"github.com/sqlcoord/sqlcoord/outbox/internal/relayutil"
)

// Options tune a Relay.
type Options struct {
	// DSN of the replication connection (a PostgreSQL URL or key=value
	// string for a user with the REPLICATION attribute, directly to the
	// primary: PgBouncer does not pass replication connections). "" takes
	// the connection settings of a pgxv5 driver.
	DSN string
	// Group names the relay group: one slot (sqlcoord_<group>_<hash of
	// the database name>) and one lease; one relay of a group streams at a
	// time, the others wait to take over. Lowercase letters, digits and _,
	// at most 32; default "outbox".
	Group string
	// Topics, if set, is the group's topic filter: it publishes only
	// messages of these topics, in commit order among them (groups on one
	// database each need their own slot: give them different Group
	// names). Every topic needs a group (or polling relay) whose filter
	// includes it, or its messages stay pending. See
	// outbox.RelayOptions.Topics for the limits.
	Topics []string
	// BatchSize bounds how many streamed messages are published and
	// marked in one transaction; default 500.
	BatchSize int
	// DeleteOnPublish deletes rows once published instead of marking them.
	DeleteOnPublish bool
	// MaxAttempts, BaseBackoff, MaxBackoff: a failed publish is retried in
	// place (later messages wait: commit order) after a backoff in
	// [d/2, d], d = min(MaxBackoff, BaseBackoff·2ⁿ⁻¹), and dead-lettered
	// after MaxAttempts; defaults 10, 10ms, 5m: the whole group waits on
	// a failing message, so the first retries come fast (with the
	// defaults a message that keeps failing is dead-lettered after about
	// 5 s of backoff; a flaky publisher costs the group milliseconds, not
	// a second, per failure). A Permanent error dead-letters at once.
	MaxAttempts             int
	BaseBackoff, MaxBackoff time.Duration
	// PublishTimeout bounds one publish; default 30s.
	PublishTimeout time.Duration
	// LeaseTTL of the group's lease; default 10s. A frozen or killed
	// streamer's group is taken over after about this long.
	LeaseTTL time.Duration
	// StatusInterval between status updates to the server when nothing
	// else is sent; default 10s (below wal_sender_timeout, 60s).
	StatusInterval time.Duration
	// ShutdownTimeout: after Run's context ends, the batch in flight is
	// finished (published, marked, acknowledged) within this time, or
	// abandoned (published again by the next streamer); default 10s.
	ShutdownTimeout time.Duration
	// AllowUnboundedSlot lets the relay create its slot on a server with
	// max_slot_wal_keep_size = -1 (an abandoned slot then keeps WAL until
	// the disk fills: watch `sqlcoord doctor`).
	AllowUnboundedSlot bool
	// Logger gets the relay's warnings (default: stderr, warnings only).
	Logger *slog.Logger
}

// Relay publishes outbox messages as PostgreSQL's logical
// replication streams their commits: in commit order (overall and per
// key), with no polling statement while idle. The slot's confirmed
// position advances only after the messages of a commit were published
// and marked, so a crash redelivers from the last acknowledged commit
// (at least once; dedupe on outbox.Message.UUID, e.g. with an Inbox).
//
// Each batch locks the streamed rows that are still pending and marks
// them published in one statement (fenced by the group's lease), publishes
// them, gives back to pending those it did not publish, and commits: a
// polling Relay running at the same time never publishes the same row
// twice with it, and a crash before the commit leaves them pending. Messages
// that become pending without an INSERT (Requeue), delayed ones (Delay)
// and, after a new slot is created, those committed before it are
// published by a polling pass the stream triggers.
type Relay struct {
	db     sqlcoord.Base
	opt    Options
	cfg    *pgconn.Config
	slot   string
	lease  string
	leases *coord.Leases // the group lease's keeper
	owner  string
	log    *slog.Logger
	rec    metrics.Recorder
	sweep  *outbox.Relay // the polling pass
	steps  relayutil.Steps[outbox.Message]
	health outbox.HealthLog
}

// pgConfigured is a driver that can give its PostgreSQL connection
// settings (pgxv5's Driver).
type pgConfigured interface{ PgConnConfig() *pgconn.Config }

// New returns a streaming relay for db (PostgreSQL) publishing
// to pub. It checks its options only; Run checks the server.
func New(db sqlcoord.Base, pub outbox.Publisher, opt Options) (*Relay, error) {
	if pub == nil {
		return nil, errs.Errorf("%w: relay needs a publisher", outbox.ErrInvalid)
	}
	if db.Dialect().Q().OutboxStreamClaim == "" {
		return nil, errs.Errorf("%w: %s: only PostgreSQL streams (MySQL and MariaDB: no binlog client is available; use the polling relay)", outbox.ErrStreamUnsupported, db)
	}
	if opt.Group == "" {
		opt.Group = "outbox"
	}
	if !relayutil.GroupName.MatchString(opt.Group) {
		return nil, errs.Errorf("%w: group %q: want 1-32 of a-z, 0-9 and _", outbox.ErrInvalid, redact.Text(opt.Group))
	}
	if opt.BatchSize == 0 {
		opt.BatchSize = 500
	}
	if opt.BatchSize < 0 || opt.BatchSize > 10000 || opt.MaxAttempts < 0 {
		return nil, errs.Errorf("%w: batch size 1-10000 and max attempts >= 0", outbox.ErrInvalid)
	}
	if err := relayutil.Durations(outbox.ErrInvalid,
		relayutil.D("BaseBackoff", &opt.BaseBackoff, 10*time.Millisecond),
		relayutil.D("MaxBackoff", &opt.MaxBackoff, 5*time.Minute),
		relayutil.D("PublishTimeout", &opt.PublishTimeout, 30*time.Second),
		relayutil.D("LeaseTTL", &opt.LeaseTTL, 10*time.Second),
		relayutil.D("StatusInterval", &opt.StatusInterval, 10*time.Second),
		relayutil.D("ShutdownTimeout", &opt.ShutdownTimeout, 10*time.Second)); err != nil {
		return nil, err
	}
	if opt.MaxAttempts == 0 {
		opt.MaxAttempts = 10
	}
	if opt.LeaseTTL < time.Second {
		return nil, errs.Errorf("%w: lease TTL %v: at least 1s", outbox.ErrInvalid, opt.LeaseTTL)
	}
	topics, err := relayutil.Topics(outbox.ErrInvalid, opt.Topics)
	if err != nil {
		return nil, err
	}
	opt.Topics = topics
	s := &Relay{db: db, opt: opt, log: relayutil.Logger(opt.Logger), rec: metrics.Of(db)}
	switch {
	case opt.DSN != "":
		cfg, err := pgconn.ParseConfig(opt.DSN)
		if err != nil {
			return nil, errs.Errorf("%w: replication DSN: %s", outbox.ErrInvalid, redact.Text(err.Error(), opt.DSN))
		}
		s.cfg = cfg
	default:
		if c, ok := db.(pgConfigured); ok {
			s.cfg = c.PgConnConfig()
		} else if dsn := core.ConnString(db); dsn != "" {
			if cfg, err := pgx.ParseConfig(dsn); err == nil { // pgx's own parameters (default_query_exec_mode) removed
				s.cfg = &cfg.Config
			}
		}
		if s.cfg == nil {
			return nil, errs.Errorf("%w: %s: give Options.DSN for the replication connection", outbox.ErrInvalid, db)
		}
	}
	s.cfg.RuntimeParams["replication"] = "database"
	s.cfg.RuntimeParams["application_name"] = "sqlcoord-stream-" + opt.Group
	s.lease = "sqlcoord.outbox.stream." + opt.Group
	s.leases = coord.NewLeases(db)
	s.owner = coord.NewOwnerID()
	// FrozenTimeout: a streamer frozen in a polling pass's batch holds its
	// rows no longer than one frozen in a streamed batch (LeaseTTL), not
	// the polling relay's default of minutes.
	sweep, err := outbox.NewRelay(db, pub, outbox.RelayOptions{BatchSize: opt.BatchSize, DeleteOnPublish: opt.DeleteOnPublish,
		FrozenTimeout: opt.LeaseTTL, MaxAttempts: opt.MaxAttempts, BaseBackoff: opt.BaseBackoff, MaxBackoff: opt.MaxBackoff,
		PublishTimeout: opt.PublishTimeout, Listen: outbox.ListenOff, Logger: s.log, Topics: opt.Topics})
	if err != nil {
		return nil, err
	}
	s.sweep, s.steps = sweep, relayutil.StepsOf(sweep).(relayutil.Steps[outbox.Message])
	return s, nil
}

// Health reports how the relay's batches have been going.
func (s *Relay) Health() outbox.Health { return s.health.Get() }

// Run streams until ctx ends (then it returns nil), waiting as a standby
// while another relay of the group streams. Database errors are logged
// and retried. It returns an error matching outbox.ErrStreamUnsupported (the
// server cannot stream to this user), outbox.ErrUnboundedSlot,
// sqlcoord.ErrNoSchema or sqlcoord.ErrAccessDenied when retrying cannot
// help.
func (s *Relay) Run(ctx context.Context) error {
	pol := backoff.Policy{Base: 100 * time.Millisecond, Max: 5 * time.Second, Jitter: backoff.Equal}
	failures := 0
	for ctx.Err() == nil {
		streamed, err := s.session(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if streamed {
			failures = 0
		}
		switch {
		case err == nil:
			continue
		case errors.Is(err, outbox.ErrStreamUnsupported), errors.Is(err, outbox.ErrUnboundedSlot), sqlcoord.Fatal(err):
			s.log.Error("stream relay stopping", "err", redact.Text(err.Error()))
			return err
		}
		s.health.Record(err)
		s.log.Warn("stream relay", "err", redact.Text(err.Error()))
		backoff.Sleep(ctx, pol.Delay(failures))
		failures++
	}
	return nil
}

// errLeaseLost: a fenced statement of the stream found the group's lease
// no longer this relay's.
var errLeaseLost = fmt.Errorf("outbox: stream lease lost: %w", coord.ErrLeaseLost)

// session holds the group's lease and streams under it; it waits for the
// lease while another relay holds it. streamed: replication started. The
// lease is kept by coord's one keeper (coord.Leases.KeepAlive): the
// session's context ends when the lease is lost or may have expired.
func (s *Relay) session(ctx context.Context) (streamed bool, err error) {
	l, err := s.leases.Acquire(ctx, s.lease, s.owner, s.opt.LeaseTTL)
	var held *coord.LeaseHeldError
	if errors.As(err, &held) {
		// A standby: try again when the holder's lease may have ended.
		wait := min(max(time.Until(held.ExpiresAt), 50*time.Millisecond), s.opt.LeaseTTL/2)
		backoff.Sleep(ctx, wait)
		return false, nil
	}
	if err != nil {
		return false, errs.Errorf("outbox: stream lease: %w", err)
	}
	k, err := s.leases.KeepAlive(ctx, l, coord.KeepAliveOptions{})
	if err != nil {
		return false, errs.Errorf("outbox: stream lease: %w", err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		k.Release(rctx)
	}()
	lctx := k.Context()
	st := &stream{s: s, lease: dialects.LeaseSlot{Name: l.Name, Owner: l.Owner, Token: l.Token, TTLMicros: l.TTL.Microseconds()}}
	err = st.run(lctx)
	if c := context.Cause(lctx); c != nil && ctx.Err() == nil && !errors.Is(c, context.Canceled) {
		err = errs.Errorf("outbox: stream lease: %w", c)
	}
	return st.started, err
}

// stream is one session's replication connection and its state.
type stream struct {
	s       *Relay
	lease   dialects.LeaseSlot
	conn    *pgconn.PgConn
	started bool

	rels   map[uint32]*pglogrepl.RelationMessage
	cur    []outbox.Message // the commit being received
	curXid uint32
	inTx   bool
	ready  []commitBatch // received commits not yet published
	queued int           // messages in ready
	acked  pglogrepl.LSN
	sent   pglogrepl.LSN // last position reported to the server
	// sweepAt: when a polling pass is due (zero: none).
	sweepAt time.Time
	// attempts of the first unpublished message, by id (retries in place).
	attempts map[int64]int
	// flushed: when the last batch ended (a batch that gathers leaves at
	// most a millisecond later, behindBy while the stream is behind).
	flushed time.Time
	// next: the next batch's transaction, begun after a batch (idle in
	// transaction: no snapshot, no xid) so that a commit streamed after a
	// quiet spell is claimed in one round trip. It is begun beside the
	// stream, not before the stream is read again: commits that arrived
	// during a batch do not wait for its BEGIN.
	next *ahead
	// lagFloor: the least lag seen in the current window (clock offset
	// and transit), a lag being how long ago a streamed commit committed
	// by the server's clock (CommitTime); lagSince: when the window
	// began; behind: the last commit's lag exceeds the floor by more
	// than behindBy — commits are waiting in the stream, so
	// batches gather for up to behindBy instead of leaving at once.
	lagFloor time.Duration
	lagSince time.Time
	behind   bool
	// lastBatch: how many messages the last batch had (busyBatch or
	// more: the next one gathers).
	lastBatch int
}

// behindBy is how far behind its commits the stream must be for batches
// to gather for behindBy (or up to BatchSize, or until nothing more
// arrives) rather than leave with what was already received; lagWindow is
// how long a floor of the lag stands before it is measured anew (clocks
// drift).
const (
	busyBatch = 64
	behindBy  = 5 * time.Millisecond
	lagWindow = 10 * time.Second
)

// observeLag records a streamed commit's age.
func (st *stream) observeLag(commitTime time.Time) {
	now := time.Now()
	lag := now.Sub(commitTime)
	if st.lagSince.IsZero() || now.Sub(st.lagSince) > lagWindow {
		st.lagSince, st.lagFloor = now, lag // a new window
	} else {
		st.lagFloor = min(st.lagFloor, lag)
	}
	st.behind = lag-st.lagFloor > behindBy
}

// nextTxLife bounds how long a begun transaction waits for its batch: an
// older one is rolled back and begun anew (no transaction looks stuck to
// monitoring, and a server's idle_in_transaction_session_timeout of more
// than this never ends one).
const nextTxLife = 5 * time.Second

// ahead is a transaction being begun for the next batch: done closes
// when BEGIN returned (tx or err set; at: when).
type ahead struct {
	done chan struct{}
	tx   dialects.OwnedTx
	err  error
	at   time.Time
}

// beginNext begins the next batch's transaction ahead, in a goroutine
// (best effort: on an error the batch begins its own).
func (st *stream) beginNext(ctx context.Context) {
	if st.next != nil || !roomToBeginAhead(st.s.db) {
		return
	}
	a := &ahead{done: make(chan struct{})}
	st.next = a
	go func() {
		defer close(a.done)
		a.tx, a.err = st.begin(ctx)
		a.at = time.Now()
	}()
}

// begin begins a batch's transaction.
func (st *stream) begin(ctx context.Context) (dialects.OwnedTx, error) {
	return core.Owned(ctx, st.s.db, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
}

// roomToBeginAhead: the transaction begun ahead holds one of db's
// connections while the stream waits; only a database/sql pool known to
// have room for it and for the lease's renewals and the polling passes
// (4 or more, or no limit) gets one.
func roomToBeginAhead(db sqlcoord.Base) bool {
	p, ok := db.(interface{ Stats() sql.DBStats })
	if !ok {
		return false
	}
	n := p.Stats().MaxOpenConnections
	return n == 0 || n >= 4
}

// dropNext rolls back the transaction begun ahead, if any: at once when
// its BEGIN has returned, otherwise when it does (a server that does
// not answer does not hold up the session's end).
func (st *stream) dropNext() {
	a := st.next
	if a == nil {
		return
	}
	st.next = nil
	rollback := func() {
		if a.err == nil {
			a.tx.Rollback(context.Background())
		}
	}
	select {
	case <-a.done:
		rollback()
	case <-time.After(time.Second):
		go func() { <-a.done; rollback() }()
	}
}

// takeNext returns the transaction begun ahead when it is young enough
// (fresh false), waiting for its BEGIN when that has not returned yet, or
// begins one (fresh true).
func (st *stream) takeNext(ctx context.Context) (tx dialects.OwnedTx, fresh bool, err error) {
	if a := st.next; a != nil {
		select {
		case <-a.done:
		case <-ctx.Done():
			return nil, false, ctx.Err() // dropNext rolls it back
		}
		st.next = nil
		if a.err == nil {
			if time.Since(a.at) < nextTxLife {
				return a.tx, false, nil
			}
			a.tx.Rollback(context.WithoutCancel(ctx))
		}
	}
	tx, err = st.begin(ctx)
	return tx, true, err
}

type commitBatch struct {
	end  pglogrepl.LSN
	xid  uint32
	msgs []outbox.Message
}

func (st *stream) run(ctx context.Context) error {
	s := st.s
	created, err := s.prepare(ctx)
	if err != nil {
		return err
	}
	conn, err := pgconn.ConnectConfig(ctx, s.cfg.Copy())
	if err != nil {
		return s.connErr("replication connection", err)
	}
	st.conn = conn
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		conn.Close(cctx)
	}()
	if created == "" {
		if err := s.takeSlot(ctx); err != nil {
			return err
		}
	} else {
		res, err := pglogrepl.CreateReplicationSlot(ctx, conn, created, "pgoutput",
			pglogrepl.CreateReplicationSlotOptions{Mode: pglogrepl.LogicalReplication, SnapshotAction: "NOEXPORT_SNAPSHOT"})
		if err != nil {
			return s.connErr("create slot "+created, err)
		}
		s.log.Info("replication slot created", "slot", res.SlotName, "at", res.ConsistentPoint)
		// Messages committed before the slot's start are not in its
		// stream: a polling pass publishes them before streaming starts
		// (rows committed meanwhile are in both; whichever publishes one
		// first marks it and the other skips it).
		if err := s.sweepPass(ctx); err != nil {
			return err
		}
	}
	if err := pglogrepl.StartReplication(ctx, conn, s.slot, 0, pglogrepl.StartReplicationOptions{
		PluginArgs: []string{"proto_version '1'", "publication_names '" + streamPublication + "'", "messages 'true'"}}); err != nil {
		return s.connErr("start replication on "+s.slot, err)
	}
	st.started = true
	defer st.dropNext()
	st.rels = map[uint32]*pglogrepl.RelationMessage{}
	st.attempts = map[int64]int{}
	s.log.Info("streaming", "slot", s.slot, "group", s.opt.Group)
	nextStatus := time.Now().Add(s.opt.StatusInterval)
	// on the way out, report what was acknowledged last (best effort)
	defer func() {
		if st.acked > st.sent {
			st.status(context.Background())
		}
	}()
	for {
		if err := ctx.Err(); err != nil {
			return nil
		}
		now := time.Now()
		if !st.sweepAt.IsZero() && !now.Before(st.sweepAt) && len(st.ready) == 0 && !st.inTx {
			st.sweepAt = time.Time{}
			if err := s.sweepPass(ctx); err != nil {
				return err
			}
		}
		if !now.Before(nextStatus) || st.acked > st.sent {
			if err := st.status(ctx); err != nil {
				return err
			}
			nextStatus = time.Now().Add(s.opt.StatusInterval)
		}
		wait := time.Until(nextStatus)
		if len(st.ready) > 0 {
			wait = 200 * time.Microsecond // a gathering batch leaves when nothing more arrives
		}
		if !st.sweepAt.IsZero() {
			wait = min(wait, max(time.Until(st.sweepAt), time.Millisecond))
		}
		rctx, cancel := context.WithTimeout(ctx, wait)
		raw, err := conn.ReceiveMessage(rctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if !pgconn.Timeout(err) {
				return s.connErr("receive", err)
			}
			if len(st.ready) > 0 && !st.inTx {
				if err := st.flush(ctx); err != nil {
					return err
				}
			}
			continue
		}
		if err := st.handle(ctx, raw); err != nil {
			return err
		}
		// A batch leaves when full; when the stream keeps up, as soon
		// as everything already received is read (nothing left in the
		// connection's read buffer) — a batch gathers what arrived while
		// the last one was published, and waits for nothing more (a
		// timer of a few hundred microseconds fires a millisecond late
		// on an idle runtime: that wait was most of the latency at
		// 1,000 msgs/s). After a large batch (a backlog being read: its
		// commits are old, not behind the floor of their own ages) it
		// gathers until nothing more arrives for 200 µs (the receive
		// above times out), for at most a millisecond; while the stream
		// is behind its commits, for at most behindBy — so that a
		// backlog leaves in larger batches and a steady stream never
		// holds one back longer.
		gather, window := st.behind || st.lastBatch >= busyBatch, time.Millisecond
		if st.behind {
			window = behindBy
		}
		if st.queued > 0 && !st.inTx && (st.queued >= s.opt.BatchSize || !gather && conn.Frontend().ReadBufferLen() == 0 || time.Since(st.flushed) > window) {
			if err := st.flush(ctx); err != nil {
				return err
			}
		}
	}
}

// status reports the acknowledged position (also as flushed and applied:
// the server may then recycle WAL before it).
func (st *stream) status(ctx context.Context) error {
	if st.acked == 0 {
		return nil
	}
	if err := pglogrepl.SendStandbyStatusUpdate(ctx, st.conn, pglogrepl.StandbyStatusUpdate{WALWritePosition: st.acked}); err != nil {
		return st.s.connErr("status update", err)
	}
	st.sent = st.acked
	return nil
}

func (st *stream) handle(ctx context.Context, raw pgproto3.BackendMessage) error {
	s := st.s
	switch m := raw.(type) {
	case *pgproto3.ErrorResponse:
		return s.connErr("stream", pgconn.ErrorResponseToPgError(m))
	case *pgproto3.CopyData:
		if len(m.Data) == 0 {
			return nil
		}
		switch m.Data[0] {
		case pglogrepl.PrimaryKeepaliveMessageByteID:
			k, err := pglogrepl.ParsePrimaryKeepaliveMessage(m.Data[1:])
			if err != nil {
				return errs.Errorf("outbox: stream keepalive: %w", err)
			}
			// Everything the server decoded before this keepalive has
			// arrived; with nothing received left unpublished, the
			// position may move past WAL that held no outbox rows.
			if len(st.ready) == 0 && !st.inTx && k.ServerWALEnd > st.acked {
				st.acked = k.ServerWALEnd
			}
			if k.ReplyRequested {
				return st.status(ctx)
			}
		case pglogrepl.XLogDataByteID:
			x, err := pglogrepl.ParseXLogData(m.Data[1:])
			if err != nil {
				return errs.Errorf("outbox: stream data: %w", err)
			}
			return st.decode(x.WALData)
		}
	}
	return nil
}

func (st *stream) decode(data []byte) error {
	msg, err := pglogrepl.Parse(data)
	if err != nil {
		return errs.Errorf("outbox: stream: %w", err)
	}
	switch m := msg.(type) {
	case *pglogrepl.RelationMessage:
		st.rels[m.RelationID] = m
	case *pglogrepl.BeginMessage:
		st.inTx, st.cur, st.curXid = true, st.cur[:0], m.Xid
	case *pglogrepl.InsertMessage:
		rel := st.rels[m.RelationID]
		if rel == nil || rel.RelationName != "coord_outbox" {
			return nil
		}
		row, due, err := decodeOutboxRow(rel, m.Tuple)
		if err != nil {
			return errs.Errorf("outbox: stream: %w", err)
		}
		if !st.s.wants(row.Topic) {
			return nil // another group's topic (or not pending)
		}
		if due.After(time.Now()) { // delayed: a polling pass publishes it
			if st.sweepAt.IsZero() || due.Before(st.sweepAt) {
				st.sweepAt = due
			}
		}
		if row.ID != 0 {
			st.cur = append(st.cur, row)
		}
	case *pglogrepl.CommitMessage:
		st.inTx = false
		st.observeLag(m.CommitTime)
		if len(st.cur) == 0 && len(st.ready) == 0 { // nothing to publish, nothing before it waiting
			st.acked = max(st.acked, m.TransactionEndLSN)
			return nil
		}
		msgs := append([]outbox.Message(nil), st.cur...)
		st.ready = append(st.ready, commitBatch{end: m.TransactionEndLSN, xid: st.curXid, msgs: msgs})
		st.queued += len(msgs)
		st.cur = st.cur[:0]
	case *pglogrepl.LogicalDecodingMessage:
		if m.Prefix == "sqlcoord.outbox" { // a requeue: pending rows without an INSERT
			st.sweepAt = time.Now()
		}
	}
	return nil
}

// decodeOutboxRow reads a coord_outbox INSERT; it also returns the row's
// available_at. A row that is not pending (inserted by hand) has ID 0.
func decodeOutboxRow(rel *pglogrepl.RelationMessage, t *pglogrepl.TupleData) (outbox.Message, time.Time, error) {
	var m outbox.Message
	var due time.Time
	var headers, state string
	if t == nil {
		return m, due, nil
	}
	for i, col := range t.Columns {
		if i >= len(rel.Columns) || col.DataType != pglogrepl.TupleDataTypeText {
			continue
		}
		v := string(col.Data)
		var err error
		switch rel.Columns[i].Name {
		case "id":
			m.ID, err = strconv.ParseInt(v, 10, 64)
		case "msg_id":
			m.UUID = v
		case "topic":
			m.Topic = v
		case "msg_key":
			m.Key = v
		case "payload":
			err = textMap.Scan(rel.Columns[i].DataType, pgTextFormat, col.Data, &m.Payload)
		case "headers":
			headers = v
		case "state":
			state = v
		case "created_at":
			err = textMap.Scan(rel.Columns[i].DataType, pgTextFormat, col.Data, &m.CreatedAt)
		case "available_at":
			err = textMap.Scan(rel.Columns[i].DataType, pgTextFormat, col.Data, &due)
		}
		if err != nil {
			return m, due, fmt.Errorf("column %s: %w", rel.Columns[i].Name, err)
		}
	}
	if state != "pending" {
		return outbox.Message{}, due, nil
	}
	if m.Payload == nil {
		m.Payload = []byte{}
	}
	h, err := relayutil.ParseHeaders(headers)
	if err != nil {
		return m, due, fmt.Errorf("headers of %d: %w", m.ID, err)
	}
	m.Headers = h
	return m, due, nil
}

// flush publishes the received commits in order and marks them in one
// transaction, then acknowledges the last one fully done. A failed
// publish (not permanent) stops the batch there: what came before is
// marked and acknowledged, the rest waits for the retry.
func (st *stream) flush(lctx context.Context) error {
	defer func() { st.flushed = time.Now() }()
	ctx, stop := st.batchContext(lctx)
	defer stop()
	var ids []int64
	for _, c := range st.ready {
		for _, m := range c.msgs {
			ids = append(ids, m.ID)
		}
	}
	st.lastBatch = len(ids)
	if len(ids) == 0 { // only empty commits
		st.acked = max(st.acked, st.ready[len(st.ready)-1].end)
		st.ready = st.ready[:0]
		return nil
	}
	b, err := st.claim(ctx, ids)
	if b.tx != nil {
		defer b.tx.Rollback(context.WithoutCancel(ctx))
	}
	if err != nil {
		return err
	}
	d := st.s.db.Dialect()
	bctx, endBatch := tracing.Start(ctx, st.s.db, "outbox.stream.batch", d, attribute.Int("sqlcoord.messages", len(ids)))
	if err := b.publish(ctx, bctx, lctx); err != nil {
		endBatch(err)
		return err
	}
	if err := b.finish(ctx, lctx); err != nil {
		endBatch(err)
		return err
	}
	endBatch(b.failed)
	if lctx.Err() == nil {
		// Not ended with the session's context: a relay stopping
		// finishes its batch in flight (ShutdownTimeout) in this
		// transaction; the session's end rolls it back (dropNext).
		st.beginNext(context.WithoutCancel(lctx))
	}
	return st.committed(lctx, b)
}

// batchContext is the context of one batch: a relay stopping (lctx
// cancelled: SIGTERM) finishes the batch in flight — the publish under
// way, then marks and acknowledges what was published — within
// ShutdownTimeout; a lost lease stops it at once (the fence and the row
// locks make a late mark harmless).
func (st *stream) batchContext(lctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(lctx))
	stopAfter := context.AfterFunc(lctx, func() {
		if errors.Is(context.Cause(lctx), context.Canceled) {
			time.AfterFunc(st.s.opt.ShutdownTimeout, cancel)
			return
		}
		cancel()
	})
	return ctx, func() { stopAfter(); cancel() }
}

// batch is one flush's transaction and what its publishes did.
type batch struct {
	st      *stream
	tx      dialects.OwnedTx
	guard   func() (stop func()) // keeps tx from looking idle while publishing
	marking bool                 // the claim marked the rows published (not DeleteOnPublish)
	pending map[int64]bool       // rows the claim locked
	marked  map[int64]bool       // claimed and marked published, not (yet) published

	published []int64
	ok        []outbox.Message
	done      int // commits fully handled
	failed    error
	failedMsg outbox.Message
}

// claim begins the batch's transaction (the one begun ahead when there is
// one) and claims ids in it.
//
// A streamer frozen in this transaction must not hold the rows its
// successor (the lease's next holder, streaming the same commits) claims:
// the server ends the session after LeaseTTL idle, so a takeover waits at
// most about that long, never for the frozen process to wake.
//
// Unless published rows are deleted, the claim marks the rows it locks
// published (fenced by the lease) and the commit decides: what is not
// published by then is given back (unmark) before COMMIT, and no mark
// statement follows the publishes.
func (st *stream) claim(ctx context.Context, ids []int64) (*batch, error) {
	s, d := st.s, st.s.db.Dialect()
	b := &batch{st: st, marking: !s.opt.DeleteOnPublish, marked: map[int64]bool{}}
	claim, claimArgs := d.Q().OutboxStreamClaim, []any(nil)
	if b.marking {
		claim, claimArgs = d.Q().OutboxStreamClaimMark, []any{st.lease.Name, st.lease.Owner, st.lease.Token}
	}
	claimQ, inClaim := d.WithIdleTimeout(claim, s.opt.LeaseTTL.Milliseconds())
	for {
		tx, fresh, err := st.takeNext(ctx)
		if err != nil {
			return b, errs.Errorf("outbox: begin: %w", d.Classify(err))
		}
		b.tx = tx
		if b.guard, err = s.steps.GuardFrozen(ctx, tx, s.opt.LeaseTTL, inClaim); err == nil {
			b.pending, err = claimIDs(ctx, tx, claimQ, ids, claimArgs...)
		}
		if err == nil {
			break
		}
		if fresh || errors.Is(err, errLeaseLost) || ctx.Err() != nil {
			return b, errs.Errorf("outbox: stream claim: %w", classifyClaim(d, err))
		}
		// the transaction begun ahead failed (its session ended while it
		// waited: a server timeout, a restart): once more in a new one
		tx.Rollback(context.WithoutCancel(ctx))
		s.log.Debug("transaction begun ahead failed; beginning anew", "err", err)
	}
	if len(b.pending) < len(ids) {
		if err := st.claimLate(ctx, b.tx, b.pending, claim, claimArgs); err != nil {
			return b, err
		}
	}
	if b.marking {
		for id := range b.pending {
			b.marked[id] = true
		}
	}
	return b, nil
}

// unmark gives ids back (pending again) in the batch's transaction.
func (b *batch) unmark(ctx context.Context, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	d := b.st.s.db.Dialect()
	if _, err := b.tx.Exec(ctx, d.Q().OutboxStreamUnmark, ids); err != nil {
		return errs.Errorf("outbox: give back %d unpublished: %w", len(ids), d.Classify(err))
	}
	for _, id := range ids {
		delete(b.marked, id)
	}
	return nil
}

// publish publishes the claimed messages in commit order, dead-lettering
// those whose failure ends them, until one fails (b.failed) or lctx ends.
func (b *batch) publish(ctx, bctx, lctx context.Context) error {
	st, s := b.st, b.st.s
	// tx is not idle while this process publishes: one beat for the whole
	// run of publishes (a beat per publish would restart its clock each
	// time, and a run of quick publishes longer than LeaseTTL would look
	// idle to the server).
	stopBeat := b.guard()
	defer func() { stopBeat() }()
	for ci, c := range st.ready {
		for _, m := range c.msgs {
			if !b.pending[m.ID] {
				continue // published by a polling pass, cancelled, or delayed
			}
			if lctx.Err() != nil { // the lease ended or the relay stops: publish no more
				b.failed, b.failedMsg = lctx.Err(), m
				return nil
			}
			m.Attempt = st.attempts[m.ID] + 1
			pctx, pc := context.WithTimeout(ctx, s.opt.PublishTimeout)
			err := s.steps.Publish(pctx, bctx, m)
			pc()
			switch {
			case err == nil:
				b.published, b.ok = append(b.published, m.ID), append(b.ok, m)
				delete(b.marked, m.ID)
			case s.steps.IsLast(m, err):
				stopBeat()           // tx is used here: no beat at the same time
				stopBeat = func() {} // not twice when what follows fails
				if b.marked[m.ID] {  // the dead letter counts its attempt from pending
					if err := b.unmark(ctx, []int64{m.ID}); err != nil {
						return err
					}
				}
				if err := s.steps.DeadLetter(ctx, b.tx, m, err); err != nil {
					return err
				}
				stopBeat = b.guard()
			default:
				b.failed, b.failedMsg = err, m
				return nil
			}
		}
		b.done = ci + 1
	}
	return nil
}

// finish gives back what was claimed and not published, records a failed
// attempt, deletes what was published (DeleteOnPublish, fenced) and
// commits.
func (b *batch) finish(ctx, lctx context.Context) error {
	st, d := b.st, b.st.s.db.Dialect()
	if len(b.marked) > 0 { // claimed and marked, not published: pending again
		back := make([]int64, 0, len(b.marked))
		for id := range b.marked {
			back = append(back, id)
		}
		if err := b.unmark(ctx, back); err != nil {
			return err
		}
	}
	if b.failed != nil && lctx.Err() == nil {
		// where operators look: the row's attempts and last error
		if _, err := b.tx.Exec(ctx, d.Q().OutboxStreamFailed, b.failedMsg.Attempt, relayutil.StoredError(b.failed), b.failedMsg.ID); err != nil {
			return errs.Errorf("outbox: record the failed attempt at %d: %w", b.failedMsg.ID, d.Classify(err))
		}
	}
	if len(b.published) > 0 && !b.marking { // DeleteOnPublish: the claim only locked them
		n, err := b.tx.Exec(ctx, d.Q().OutboxStreamDelete, b.published, st.lease.Name, st.lease.Owner, st.lease.Token)
		if err != nil {
			return errs.Errorf("outbox: delete %d published: %w", len(b.published), d.Classify(err))
		}
		if n < int64(len(b.published)) { // the rows are ours (locked): the fence refused
			return errs.Errorf("outbox: delete %d published: %w", len(b.published), errLeaseLost)
		}
	}
	if err := b.tx.Commit(ctx); err != nil {
		return errs.Errorf("outbox: commit: %w", d.ClassifyCommit(err))
	}
	return nil
}

// committed moves the stream past a committed batch: what was published
// is acknowledged; after a failed publish the failed commit and those
// after it are kept for the retry, after its backoff.
func (st *stream) committed(lctx context.Context, b *batch) error {
	s := st.s
	for _, m := range b.ok {
		delete(st.attempts, m.ID)
		s.rec.OutboxPublish(m.Topic, "ok", time.Since(m.CreatedAt))
	}
	if b.done > 0 {
		st.acked = max(st.acked, st.ready[b.done-1].end)
	}
	if b.failed == nil {
		st.ready, st.queued = st.ready[:0], 0
		s.health.Record(nil)
		return nil
	}
	// Keep the failed commit (its published messages are marked now, so
	// the retry skips them) and those after it; wait, then retry.
	st.ready = append(st.ready[:0], st.ready[b.done:]...)
	st.queued = 0
	for _, c := range st.ready {
		st.queued += len(c.msgs)
	}
	m := b.failedMsg
	st.attempts[m.ID] = m.Attempt
	s.rec.OutboxPublish(m.Topic, "retry", 0)
	s.health.Record(errs.Errorf("outbox: publish %d: %w", m.ID, b.failed))
	s.log.Debug("publish failed; will retry", "id", m.ID, "topic", m.Topic, "attempt", m.Attempt, "err", relayutil.StoredError(b.failed))
	return st.pause(lctx, s.steps.RetryDelay(m.Attempt))
}

// claimLate handles streamed rows the claim did not find. A commit reaches
// the stream once its WAL is flushed, a moment before the committing
// session leaves the proc array and its rows become visible to others: a
// row missing from the claim may only be not yet visible. claimLate waits
// until no streamed transaction with a missing row is still in progress in
// a snapshot, then claims those rows again (the others were published by
// a polling pass, cancelled, or are delayed).
func (st *stream) claimLate(ctx context.Context, tx dialects.OwnedTx, pending map[int64]bool, claim string, claimArgs []any) error {
	d := st.s.db.Dialect()
	var missing []int64
	xids := map[uint32]bool{}
	for _, c := range st.ready {
		for _, m := range c.msgs {
			if !pending[m.ID] {
				missing = append(missing, m.ID)
				xids[c.xid] = true
			}
		}
	}
	wait := backoff.Policy{Base: 50 * time.Microsecond, Max: 10 * time.Millisecond}
	for i := 0; ; i++ {
		var snap string
		if err := tx.QueryRow(ctx, `SELECT pg_current_snapshot()::text`).Scan(&snap); err != nil {
			return errs.Errorf("outbox: stream snapshot: %w", d.Classify(err))
		}
		running, err := inProgress(snap, xids)
		if err != nil {
			return errs.Errorf("outbox: stream snapshot %q: %w", snap, err)
		}
		if !running {
			break
		}
		if err := backoff.Sleep(ctx, wait.Delay(i)); err != nil {
			return err
		}
	}
	late, err := claimIDs(ctx, tx, claim, missing, claimArgs...)
	if err != nil {
		return errs.Errorf("outbox: stream claim: %w", classifyClaim(d, err))
	}
	for id := range late {
		pending[id] = true
	}
	return nil
}

// inProgress reports whether any of the 32-bit transaction ids is still
// in progress in the snapshot snap (pg_snapshot text: xmin:xmax:xip,…,
// 64-bit ids): at or above xmax (xmax is the latest completed id + 1: a
// transaction that has not left the proc array can be there), or listed.
// A 32-bit id is read as the 64-bit id nearest xmax (within 2³¹).
func inProgress(snap string, xids map[uint32]bool) (bool, error) {
	parts := strings.SplitN(snap, ":", 3)
	if len(parts) != 3 {
		return false, errors.New("not a snapshot")
	}
	xmax, err := strconv.ParseUint(parts[1], 10, 64)
	if err != nil {
		return false, err
	}
	running := map[uint64]bool{}
	if parts[2] != "" {
		for _, f := range strings.Split(parts[2], ",") {
			x, err := strconv.ParseUint(f, 10, 64)
			if err != nil {
				return false, err
			}
			running[x] = true
		}
	}
	for x := range xids {
		d := int32(x - uint32(xmax)) // x - xmax, in 32-bit wraparound arithmetic
		if d >= 0 || running[uint64(int64(xmax)+int64(d))] {
			return true, nil
		}
	}
	return false, nil
}

// pause waits d, still telling the server it is alive.
func (st *stream) pause(ctx context.Context, d time.Duration) error {
	until := time.Now().Add(d)
	for ctx.Err() == nil {
		left := time.Until(until)
		if left <= 0 {
			return nil
		}
		backoff.Sleep(ctx, min(left, st.s.opt.StatusInterval))
		if err := st.status(ctx); err != nil {
			return err
		}
	}
	return nil
}

// claimIDs runs a claim (OutboxStreamClaim, or OutboxStreamClaimMark with
// the lease in more) for ids and returns the ids it locked. A row -1 from
// OutboxStreamClaimMark (the lease is not live) is errLeaseLost.
func claimIDs(ctx context.Context, tx dialects.Executor, q string, ids []int64, more ...any) (map[int64]bool, error) {
	rows, err := tx.Query(ctx, q, append([]any{ids}, more...)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make(map[int64]bool, len(ids))
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		if id < 0 {
			return nil, errLeaseLost
		}
		out[id] = true
	}
	return out, rows.Err()
}

// classifyClaim classifies a claim's error, keeping errLeaseLost as it is.
func classifyClaim(d *dialects.Dialect, err error) error {
	if errors.Is(err, errLeaseLost) {
		return err
	}
	return d.Classify(err)
}

// sweepPass publishes what is pending and due by polling, until a batch
// comes back short.
func (s *Relay) sweepPass(ctx context.Context) error {
	for ctx.Err() == nil {
		n, err := s.sweep.Once(ctx)
		if err != nil {
			return err
		}
		if n < s.steps.BatchSize() {
			return nil
		}
	}
	return nil
}

// connErr wraps a replication-connection error without secrets, as
// outbox.ErrStreamUnsupported when the server cannot stream to this user.
func (s *Relay) connErr(what string, err error) error {
	text := redact.Text(err.Error(), s.opt.DSN)
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "42501", "28000": // insufficient_privilege; no pg_hba entry for replication
			return errs.Errorf("%w: %s: %s (the user needs the REPLICATION attribute and a pg_hba entry)", outbox.ErrStreamUnsupported, what, text)
		case "08P01": // protocol_violation: PgBouncer refuses the replication parameter
			if strings.Contains(pe.Message, "replication") {
				return errs.Errorf("%w: %s: %s (a pooler such as PgBouncer does not pass replication connections: give the relay a direct DSN, Options.DSN or --stream-dsn)", outbox.ErrStreamUnsupported, what, text)
			}
		case "55000": // object_not_in_prerequisite_state: wal_level, a slot in use
			if pe.Message != "" && (strings.Contains(pe.Message, "wal_level") || strings.Contains(pe.Message, "logical decoding requires")) {
				return errs.Errorf("%w: %s: %s", outbox.ErrStreamUnsupported, what, text)
			}
		}
	}
	return errs.Errorf("outbox: stream %s: %w", what, redact.Error{Msg: text, Err: err})
}

// wants: topic passes the group's topic filter (sorted; none: all).
func (s *Relay) wants(topic string) bool {
	if len(s.opt.Topics) == 0 {
		return true
	}
	_, found := slices.BinarySearch(s.opt.Topics, topic)
	return found
}
