package outbox

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/internal/backoff"
	"github.com/sqlcoord/sqlcoord/internal/errs"
)

// streamPublication is the publication the streaming relays read: the
// INSERTs into coord_outbox only.
const streamPublication = "sqlcoord_outbox"

var textMap = pgtype.NewMap()

const pgTextFormat = pgtype.TextFormatCode

// CanStream reports why db cannot stream the outbox (nil: it can, as far
// as the server's settings show; the replication privilege is checked
// when the relay connects). The error matches ErrStreamUnsupported.
func CanStream(ctx context.Context, db sqlcoord.Base) error {
	d := db.Dialect()
	if d.Q.OutboxStreamClaim == "" {
		return errs.Errorf("%w: %s: only PostgreSQL streams (MySQL and MariaDB: no binlog client is available; the polling relay runs instead)", ErrStreamUnsupported, db)
	}
	var level string
	if err := db.Executor().QueryRow(ctx, `SELECT current_setting('wal_level')`).Scan(&level); err != nil {
		return errs.Errorf("outbox: read wal_level: %w", d.Classify(err))
	}
	if level != "logical" {
		return errs.Errorf("%w: wal_level is %s (set wal_level = logical and restart the server)", ErrStreamUnsupported, level)
	}
	var inRecovery bool
	if err := db.Executor().QueryRow(ctx, `SELECT pg_is_in_recovery()`).Scan(&inRecovery); err == nil && inRecovery {
		return errs.Errorf("%w: %w: the server is a standby", ErrStreamUnsupported, sqlcoord.ErrReadOnly)
	}
	return nil
}

// prepare checks the server, creates the publication when missing and
// finds the slot; created is the slot's name when it must be created.
func (s *StreamRelay) prepare(ctx context.Context) (created string, err error) {
	if err := CanStream(ctx, s.db); err != nil {
		return "", err
	}
	d, x := s.db.Dialect(), s.db.Executor()
	var dbName string
	if err := x.QueryRow(ctx, `SELECT current_database()`).Scan(&dbName); err != nil {
		return "", errs.Errorf("outbox: stream: %w", d.Classify(err))
	}
	s.slot = SlotName(s.opt.Group, dbName)
	var pub bool
	if err := x.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = $1)`, streamPublication).Scan(&pub); err != nil {
		return "", errs.Errorf("outbox: stream: %w", d.Classify(err))
	}
	if !pub {
		_, err := x.Exec(ctx, `CREATE PUBLICATION `+streamPublication+` FOR TABLE coord_outbox WITH (publish = 'insert')`)
		var pe *pgconn.PgError
		if err != nil && !(errors.As(err, &pe) && pe.Code == "42710") { // duplicate_object: another relay made it
			return "", errs.Errorf("outbox: create publication %s (needs ownership of coord_outbox): %w", streamPublication, d.Classify(err))
		}
	}
	var exists bool
	if err := x.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = $1)`, s.slot).Scan(&exists); err != nil {
		return "", errs.Errorf("outbox: stream: %w", d.Classify(err))
	}
	if exists {
		return "", nil
	}
	var keep string
	if err := x.QueryRow(ctx, `SELECT current_setting('max_slot_wal_keep_size')`).Scan(&keep); err != nil {
		return "", errs.Errorf("outbox: stream: %w", d.Classify(err))
	}
	if keep == "-1" && !s.opt.AllowUnboundedSlot {
		return "", errs.Errorf("%w: max_slot_wal_keep_size is -1: a relay that stops for good would keep WAL until the disk fills; set it (e.g. 10GB) or allow an unbounded slot", ErrUnboundedSlot)
	}
	return s.slot, nil
}

// takeSlot ends the session of a previous holder still attached to the
// slot (frozen, or its lease expired): this relay holds the group's lease
// with a newer token, so that streamer has been superseded.
func (s *StreamRelay) takeSlot(ctx context.Context) error {
	d, x := s.db.Dialect(), s.db.Executor()
	for i := 0; ; i++ {
		var pid *int32
		err := x.QueryRow(ctx, `SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1`, s.slot).Scan(&pid)
		if err != nil {
			return errs.Errorf("outbox: stream slot %s: %w", s.slot, d.Classify(err))
		}
		if pid == nil {
			return nil
		}
		if i == 0 {
			s.log.Warn("ending the superseded streamer's session", "slot", s.slot, "pid", *pid)
		}
		if _, err := x.Exec(ctx, `SELECT pg_terminate_backend($1)`, *pid); err != nil {
			return errs.Errorf("outbox: end the superseded streamer (pid %d) on %s: %w", *pid, s.slot, d.Classify(err))
		}
		if i > 50 {
			return errs.Errorf("outbox: stream slot %s stays in use by pid %d", s.slot, *pid)
		}
		backoff.Sleep(ctx, 100*time.Millisecond)
	}
}

// Slot is a streaming relay's replication slot as the server reports it.
type Slot struct {
	Name     string
	Database string
	Active   bool  // a relay is attached
	LagBytes int64 // WAL retained behind its confirmed position
	// WALStatus is the server's view: reserved, extended, unreserved or
	// lost (the slot fell behind max_slot_wal_keep_size: drop it; the
	// relay then makes a new one and publishes what is pending by polling).
	WALStatus string
	// SafeBytes is how much more WAL may be written before the slot is
	// lost (-1: no bound).
	SafeBytes int64
}

// Slots lists the replication slots of the streaming relays of db's
// database (none on MySQL and MariaDB).
func Slots(ctx context.Context, db sqlcoord.Base) ([]Slot, error) {
	d := db.Dialect()
	if d.Q.OutboxSlots == "" {
		return nil, nil
	}
	rows, err := db.Executor().Query(ctx, d.Q.OutboxSlots)
	if err != nil {
		return nil, errs.Errorf("outbox: slots: %w", d.Classify(err))
	}
	defer rows.Close()
	var out []Slot
	for rows.Next() {
		var sl Slot
		if err := rows.Scan(&sl.Name, &sl.Database, &sl.Active, &sl.LagBytes, &sl.WALStatus, &sl.SafeBytes); err != nil {
			return nil, errs.Errorf("outbox: slots: %w", d.Classify(err))
		}
		out = append(out, sl)
	}
	return out, rows.Err()
}

// DropStreamSlot drops group's replication slot on db's database (a
// group retired for good: its slot would keep WAL). It fails while a relay
// streams from it; a group without a slot is not an error.
func DropStreamSlot(ctx context.Context, db sqlcoord.Base, group string) error {
	d := db.Dialect()
	if d.Q.OutboxSlots == "" {
		return nil
	}
	if !groupName.MatchString(group) {
		return errs.Errorf("%w: group: want 1-32 of a-z, 0-9 and _", ErrInvalid)
	}
	var dbName string
	if err := db.Executor().QueryRow(ctx, `SELECT current_database()`).Scan(&dbName); err != nil {
		return errs.Errorf("outbox: drop slot: %w", d.Classify(err))
	}
	if _, err := db.Executor().Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1`, SlotName(group, dbName)); err != nil {
		return errs.Errorf("outbox: drop slot: %w", d.Classify(err))
	}
	return nil
}
