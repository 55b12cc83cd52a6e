// Package outbox is a transactional outbox: Enqueue inserts the message in
// the caller's business transaction, so a message exists exactly when that
// transaction committed — never for a rolled-back order, never missing for
// a committed one. A Relay (any number of them, in any processes) claims
// due messages with FOR UPDATE SKIP LOCKED, publishes them and marks them
// published in the same transaction; a relay that crashes mid-batch rolls
// back and the batch is published again by another relay. Delivery is
// therefore at least once: publishers pass the outbox id as the message id
// (NATS JetStream dedup window, HTTP Idempotency-Key), and consumers record
// it in the Inbox in the transaction of their effect.
package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"maps"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/sqlcoord/sqlcoord/internal/errs"
	"github.com/sqlcoord/sqlcoord/internal/tracing"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/coord/ids"
	"github.com/sqlcoord/sqlcoord/dialects"
	"github.com/sqlcoord/sqlcoord/internal/sqlutil"
	"github.com/sqlcoord/sqlcoord/internal/valid"
	"github.com/sqlcoord/sqlcoord/txn"
)

// ErrInvalid: invalid topic, key, header or option.
var ErrInvalid = errors.New("outbox: invalid")

// validHeaders refuses a header name or value that would not be stored
// byte for byte: not UTF-8 (JSON would replace the bytes), or holding NUL
// (PostgreSQL's jsonb refuses it); and an empty name.
func validHeaders(h map[string]string) error {
	for k, v := range h {
		if k == "" {
			return errs.Errorf("%w: a header with an empty name", ErrInvalid)
		}
		if !utf8.ValidString(k) || strings.ContainsRune(k, 0) {
			return errs.Errorf("%w: header name %q is not UTF-8 text without NUL", ErrInvalid, k)
		}
		if !utf8.ValidString(v) || strings.ContainsRune(v, 0) {
			return errs.Errorf("%w: header %q: value %q is not UTF-8 text without NUL", ErrInvalid, k, v)
		}
	}
	return nil
}

// ErrNotPending: Cancel came too late — the message was published or
// dead-lettered, or a relay is publishing it right now. Nothing changed.
var ErrNotPending = errors.New("outbox: message is no longer pending")

// ErrNoMessage: Cancel named a message id the outbox does not hold (never
// enqueued, or published and deleted).
var ErrNoMessage = errors.New("outbox: no such message")

// Message is an outbox row as a publisher sees it.
type Message struct {
	// ID orders messages within one outbox table only: it restarts after
	// migrate down/up, repeats across services and databases, and a
	// failover that loses the tail of the sequence can hand it to another
	// message. Never use it to identify a message outside this table.
	ID int64
	// UUID is the message's globally unique id (a UUIDv7 written by
	// Enqueue), stored with the row; MessageID returns it.
	UUID      string
	Topic     string
	Key       string // "" when none
	Payload   []byte
	Headers   map[string]string
	CreatedAt time.Time
	Attempt   int // 1 for the first publish attempt
}

// MessageID is the id publishers give brokers and consumers for dedup
// (Nats-Msg-Id, the webhook's Idempotency-Key, the Inbox key): the
// message's UUID, unique across services, schema reinstalls and failovers.
func (m Message) MessageID() string {
	if m.UUID != "" {
		return m.UUID
	}
	return "outbox-" + strconv.FormatInt(m.ID, 10) // a Message built by hand
}

// Msg describes a message to enqueue.
type Msg struct {
	Topic   string
	Key     string // optional; with Relay.Ordered, messages of one key are published in order
	Payload []byte
	Headers map[string]string
	Delay   time.Duration // deliver no earlier than now + Delay (database clock)
	// ID is the message's global id, a UUID (Message.UUID, the
	// publisher's dedupe key); "" means a new UUIDv7. Choose it yourself
	// to Cancel the message later, or to make a retried Enqueue of the
	// same message fail on the unique index (sqlcoord.ErrDuplicate)
	// instead of sending it twice.
	ID string
}

// JSON builds a Msg with a JSON payload.
func JSON(topic, key string, v any) (Msg, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return Msg{}, errs.Errorf("outbox: %w", err)
	}
	return Msg{Topic: topic, Key: key, Payload: b, Headers: map[string]string{"Content-Type": "application/json"}}, nil
}

// Outbox enqueues messages for one database.
type Outbox[TTx any] struct{ db sqlcoord.Driver[TTx] }

// NewOutbox returns an Outbox for the driver (e.g. a *sqlcoord.DB);
// Enqueue takes the driver's transaction type.
func New[TTx any](db sqlcoord.Driver[TTx]) *Outbox[TTx] { return &Outbox[TTx]{db: db} }

// Enqueue inserts messages in tx, the caller's business transaction: they
// become visible to relays when, and only if, tx commits. On PostgreSQL it
// also queues a NOTIFY (delivered at commit) so listening relays wake up.
// With tracing on (the driver's SetTracerProvider) each message's headers
// carry the W3C traceparent of the enqueue span: the relay publishes in
// that trace and a consumer can continue it.
func (o *Outbox[TTx]) Enqueue(ctx context.Context, tx TTx, msgs ...Msg) (retErr error) {
	ctx, end := tracing.Start(ctx, o.db, "outbox.enqueue", o.db.Dialect(), attribute.Int("sqlcoord.messages", len(msgs)))
	defer func() { end(retErr) }()
	traced := trace.SpanContextFromContext(ctx).IsValid() && tracing.On(o.db)
	q := o.db.Dialect().Q()
	x := o.db.TxExecutor(tx)
	for i, m := range msgs {
		if err := valid.Text("topic", m.Topic, 255); err != nil {
			return errs.Errorf("%w: %w", ErrInvalid, err)
		}
		if err := valid.Optional("message key", m.Key, 255); err != nil {
			return errs.Errorf("%w: %w", ErrInvalid, err)
		}
		if m.Delay < 0 {
			return errs.Errorf("%w: negative delay %v", ErrInvalid, m.Delay)
		}
		if err := validHeaders(m.Headers); err != nil {
			return err
		}
		if m.Payload == nil {
			m.Payload = []byte{}
		}
		headers := m.Headers
		if traced {
			headers = maps.Clone(m.Headers)
			if headers == nil {
				headers = map[string]string{}
			}
			propagation.TraceContext{}.Inject(ctx, propagation.MapCarrier(headers))
		}
		h := "{}"
		if len(headers) > 0 {
			b, _ := json.Marshal(headers)
			h = string(b)
		}
		key := sql.NullString{String: m.Key, Valid: m.Key != ""}
		id, err := messageID(m.ID)
		if err != nil {
			return err
		}
		if m.ID != "" {
			// the caller's id, refused a second time by coord_outbox_ids'
			// primary key (also once the outbox is partitioned)
			if _, err := x.Exec(ctx, q.OutboxIDInsert, id.String()); err != nil {
				return errs.Errorf("outbox: enqueue %s: message id %s: %w", m.Topic, id, o.db.Dialect().Classify(err))
			}
		}
		stmt := q.OutboxInsert
		if i == len(msgs)-1 {
			stmt = q.OutboxInsertWake // one wake-up per call, in the same round trip
		}
		if _, err := x.Exec(ctx, stmt, m.Topic, key, m.Payload, h, m.Delay.Microseconds(), id.String()); err != nil {
			return errs.Errorf("outbox: enqueue %s: %w", m.Topic, o.db.Dialect().Classify(err))
		}
	}
	return nil
}

// messageID is a Msg's id: the caller's UUID in canonical form, or a new
// UUIDv7.
func messageID(given string) (uuid.UUID, error) {
	if given == "" {
		id, err := ids.NewUUIDv7()
		if err != nil {
			return id, errs.Errorf("outbox: message id: %w", err)
		}
		return id, nil
	}
	id, err := uuid.Parse(given)
	if err != nil || len(given) != 36 {
		return id, errs.Errorf("%w: message id %s is not a UUID (xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)", ErrInvalid, valid.Quote(given))
	}
	return id, nil
}

// Cancel withdraws a pending message in tx, the caller's transaction: it
// is deleted if and only if tx commits, and no relay publishes it then
// (the row stays locked until tx ends, and relays skip locked rows). The
// typical use is a delayed message ("close the order in 30 minutes")
// cancelled by the transaction that makes it moot ("the order was paid").
//
// It refuses, changing nothing, with ErrNotPending when the message was
// already published or dead-lettered or a relay is publishing it at this
// moment (never waiting for that relay), and with ErrNoMessage when the
// outbox holds no message with that id. id is Msg.ID (or Message.UUID).
func (o *Outbox[TTx]) Cancel(ctx context.Context, tx TTx, id string) (retErr error) {
	ctx, end := tracing.Start(ctx, o.db, "outbox.cancel", o.db.Dialect())
	defer func() { end(retErr) }()
	u, err := uuid.Parse(id)
	if err != nil || len(id) != 36 {
		return errs.Errorf("%w: message id %s is not a UUID", ErrInvalid, valid.Quote(id))
	}
	d := o.db.Dialect()
	x := o.db.TxExecutor(tx)
	var state string
	err = x.QueryRow(ctx, d.Q().OutboxCancelLock, u.String()).Scan(&state)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		// locked by a relay right now, or not there at all
		if err := x.QueryRow(ctx, d.Q().OutboxState, u.String()).Scan(&state); errors.Is(err, sql.ErrNoRows) {
			return errs.Errorf("outbox: cancel %s: %w", u, ErrNoMessage)
		} else if err != nil {
			return errs.Errorf("outbox: cancel %s: %w", u, d.Classify(err))
		}
		return errs.Errorf("outbox: cancel %s: %w (a relay is publishing it)", u, ErrNotPending)
	case err != nil:
		return errs.Errorf("outbox: cancel %s: %w", u, d.Classify(err))
	case state != "pending":
		return errs.Errorf("outbox: cancel %s: %w (it is %s)", u, ErrNotPending, state)
	}
	if _, err := x.Exec(ctx, d.Q().OutboxCancel, u.String()); err != nil {
		return errs.Errorf("outbox: cancel %s: %w", u, d.Classify(err))
	}
	return nil
}

// Stats is the outbox state.
type Stats struct {
	Pending, Published, Dead int64
	Lag                      time.Duration // age of the oldest pending message
	// Failing counts the pending messages whose last publish failed and
	// that wait for a retry — a streaming group's head stuck on a failing
	// message shows here (and in the console, and as
	// sqlcoord_outbox_failing).
	Failing int64
}

// EnqueueNow enqueues messages in a short transaction of its own, for
// messages that belong to no business transaction (tools, tests, events
// with no state change). Use Enqueue to tie messages to your transaction:
// that is the outbox's guarantee.
func (o *Outbox[TTx]) EnqueueNow(ctx context.Context, msgs ...Msg) error {
	return txn.Do(ctx, o.db, txn.Options{MaxAttempts: 1}, func(ctx context.Context, tx TTx) error {
		return o.Enqueue(ctx, tx, msgs...)
	})
}

// Admin inspects and repairs the outbox table of any driver: what the CLI
// and the web console use. Outbox's Stats, Dead and Requeue are Admin's.
type Admin struct{ db sqlcoord.Base }

// NewAdmin returns the outbox administration of db.
func NewAdmin(db sqlcoord.Base) Admin { return Admin{db: db} }

// Stats counts messages per state.
func (o *Outbox[TTx]) Stats(ctx context.Context) (Stats, error) { return NewAdmin(o.db).Stats(ctx) }

// Dead lists up to n dead-lettered messages, oldest first.
func (o *Outbox[TTx]) Dead(ctx context.Context, n int) ([]DeadMessage, error) {
	return NewAdmin(o.db).Dead(ctx, n)
}

// Requeue makes a dead message (id > 0) or all dead messages (id == 0)
// pending again with a fresh attempt budget.
func (o *Outbox[TTx]) Requeue(ctx context.Context, id int64) (int64, error) {
	return NewAdmin(o.db).Requeue(ctx, id)
}

// Stats counts messages per state.
func (o Admin) Stats(ctx context.Context) (Stats, error) {
	var s Stats
	var lag float64
	if err := o.db.Executor().QueryRow(ctx, o.db.Dialect().Q().OutboxStats).Scan(&s.Pending, &s.Published, &s.Dead, &lag, &s.Failing); err != nil {
		return s, errs.Errorf("outbox: stats: %w", o.db.Dialect().Classify(err))
	}
	s.Lag = time.Duration(lag * float64(time.Second))
	return s, nil
}

// DeadMessage is a dead-lettered message.
type DeadMessage struct {
	ID        int64     `json:"id"`
	UUID      string    `json:"uuid"` // the message's global id (Message.MessageID)
	Topic     string    `json:"topic"`
	Key       string    `json:"key"`
	Attempts  int       `json:"attempts"`
	LastError string    `json:"last_error"`
	CreatedAt time.Time `json:"created_at"`
}

// Dead lists up to n dead-lettered messages, oldest first.
func (o Admin) Dead(ctx context.Context, n int) ([]DeadMessage, error) {
	rows, err := o.db.Executor().Query(ctx, o.db.Dialect().Q().OutboxListDead, n)
	if err != nil {
		return nil, errs.Errorf("outbox: dead: %w", o.db.Dialect().Classify(err))
	}
	defer rows.Close()
	var out []DeadMessage
	for rows.Next() {
		var d DeadMessage
		if err := rows.Scan(&d.ID, &d.UUID, &d.Topic, &d.Key, &d.Attempts, &d.LastError, &d.CreatedAt); err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// Requeue makes a dead message (id > 0) or all dead messages (id == 0)
// pending again with a fresh attempt budget.
func (o Admin) Requeue(ctx context.Context, id int64) (int64, error) {
	n, err := o.db.Executor().Exec(ctx, o.db.Dialect().Q().OutboxRequeue, id, id)
	if err != nil {
		return 0, errs.Errorf("outbox: requeue: %w", o.db.Dialect().Classify(err))
	}
	if q := o.db.Dialect().Q().OutboxStreamWake; n > 0 && q != "" {
		// a streaming relay sees INSERTs only: tell it through the WAL
		// (best effort: without it a relay's next polling pass finds them)
		o.db.Executor().Exec(ctx, q)
	}
	return n, nil
}

// Cleanup deletes published messages older than age, oldest first, batch
// rows per transaction (default 1,000), and returns how many. Each batch
// locks only the rows it deletes (PostgreSQL: picked with SKIP LOCKED;
// MySQL family: picked by a non-locking read of the (state, id) index,
// deleted by primary key at READ COMMITTED), so it never blocks producers
// or relays; it does compete with them for the server's CPU and I/O
// (`sqlcoord bench growth` measures producers while it runs):
// sqlcoord.Options.CleanupDuty paces it (docs/retention.md). It also
// forgets the message ids callers chose (Msg.ID) longer than age ago: such
// an id can then be enqueued again as a new message. The count returned is
// of messages.
func (o *Outbox[TTx]) Cleanup(ctx context.Context, age time.Duration, batch int) (int64, error) {
	if batch <= 0 {
		batch = 1000
	}
	if age < 0 {
		return 0, sqlutil.ErrNegativeAge
	}
	n, err := sqlutil.InBatches(ctx, o.db, sqlutil.Pace(o.db.CleanupPace()), batch, func(ctx context.Context, x dialects.Executor) (int64, error) {
		return o.db.Dialect().OutboxCleanup(ctx, x, age, batch)
	})
	if err != nil {
		return n, errs.Errorf("sqlcoord: cleanup: %w", err)
	}
	if _, err := cleanup(ctx, o.db, o.db.Dialect().Q().OutboxIDCleanup, age, batch); err != nil {
		return n, errs.Errorf("sqlcoord: cleanup of chosen message ids: %w", err)
	}
	return n, nil
}

func cleanup(ctx context.Context, db sqlcoord.Base, q string, age time.Duration, batch int) (int64, error) {
	return sqlutil.DeleteInBatches(ctx, db, sqlutil.Pace(db.CleanupPace()), q, age, batch)
}

// Inbox deduplicates deliveries on the consumer side.
type Inbox[TTx any] struct {
	db       sqlcoord.Driver[TTx]
	consumer string
}

// NewInbox returns the inbox of one consumer (a name per consuming service
// or handler).
func NewInbox[TTx any](db sqlcoord.Driver[TTx], consumer string) (*Inbox[TTx], error) {
	if err := valid.Text("inbox consumer", consumer, 128); err != nil {
		return nil, errs.Errorf("%w: %w", ErrInvalid, err)
	}
	return &Inbox[TTx]{db: db, consumer: consumer}, nil
}

// Receive records messageID in tx, the transaction of the consumer's
// effect. first is false when the message was received (and committed)
// before: skip the effect and acknowledge. A concurrent delivery of the
// same id waits for tx.
func (in *Inbox[TTx]) Receive(ctx context.Context, tx TTx, messageID string) (first bool, err error) {
	if err := valid.Text("message id", messageID, 255); err != nil {
		return false, errs.Errorf("%w: %w", ErrInvalid, err)
	}
	n, err := in.db.TxExecutor(tx).Exec(ctx, in.db.Dialect().Q().InboxInsert, in.consumer, messageID)
	if err != nil {
		return false, errs.Errorf("outbox: inbox: %w", in.db.Dialect().Classify(err))
	}
	return n == 1, nil
}

// Cleanup deletes inbox rows older than age in batches. Keep age above the
// longest redelivery horizon of your brokers.
func (in *Inbox[TTx]) Cleanup(ctx context.Context, age time.Duration, batch int) (int64, error) {
	return cleanup(ctx, in.db, in.db.Dialect().Q().InboxCleanup, age, batch)
}
