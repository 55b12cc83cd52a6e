package pgstream

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/sqlcoord/sqlcoord/internal/backoff"
	"github.com/sqlcoord/sqlcoord/internal/errs"
	"github.com/sqlcoord/sqlcoord/outbox"
)

// streamPublication is the publication the streaming relays read: the
// INSERTs into coord_outbox only.
const streamPublication = "sqlcoord_outbox"

var textMap = pgtype.NewMap()

const pgTextFormat = pgtype.TextFormatCode

// prepare checks the server, creates the publication when missing and
// finds the slot; created is the slot's name when it must be created.
func (s *Relay) prepare(ctx context.Context) (created string, err error) {
	if err := outbox.CanStream(ctx, s.db); err != nil {
		return "", err
	}
	d, x := s.db.Dialect(), s.db.Executor()
	var dbName string
	if err := x.QueryRow(ctx, `SELECT current_database()`).Scan(&dbName); err != nil {
		return "", errs.Errorf("outbox: stream: %w", d.Classify(err))
	}
	s.slot = outbox.SlotName(s.opt.Group, dbName)
	var pub bool
	if err := x.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = $1)`, streamPublication).Scan(&pub); err != nil {
		return "", errs.Errorf("outbox: stream: %w", d.Classify(err))
	}
	if !pub {
		_, err := x.Exec(ctx, `CREATE PUBLICATION `+streamPublication+` FOR TABLE coord_outbox WITH (publish = 'insert', publish_via_partition_root = true)`)
		var pe *pgconn.PgError
		if err != nil && !(errors.As(err, &pe) && pe.Code == "42710") { // duplicate_object: another relay made it
			return "", errs.Errorf("outbox: create publication %s (needs ownership of coord_outbox): %w", streamPublication, d.Classify(err))
		}
	}
	var status string
	err = x.QueryRow(ctx, `SELECT coalesce(wal_status, '') FROM pg_replication_slots WHERE slot_name = $1`, s.slot).Scan(&status)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return "", errs.Errorf("outbox: stream: %w", d.Classify(err))
	case status != "lost":
		return "", nil
	default:
		// The slot fell behind max_slot_wal_keep_size and the server
		// removed the WAL it needed: nobody can read it again. A new one
		// starts now, and the polling pass after its creation publishes
		// every row still pending — the table, not the slot, holds the
		// messages — so nothing is lost, and what the old slot had not
		// confirmed may come again.
		s.log.Warn("replication slot lost (it fell behind max_slot_wal_keep_size): dropping it; a new one is made and what is pending is published by polling", "slot", s.slot)
		if _, err := x.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1 AND wal_status = 'lost'`, s.slot); err != nil {
			return "", errs.Errorf("outbox: drop the lost slot %s: %w", s.slot, d.Classify(err))
		}
	}
	var keep string
	if err := x.QueryRow(ctx, `SELECT current_setting('max_slot_wal_keep_size')`).Scan(&keep); err != nil {
		return "", errs.Errorf("outbox: stream: %w", d.Classify(err))
	}
	if keep == "-1" && !s.opt.AllowUnboundedSlot {
		return "", errs.Errorf("%w: max_slot_wal_keep_size is -1: a relay that stops for good would keep WAL until the disk fills; set it (e.g. 10GB) or allow an unbounded slot", outbox.ErrUnboundedSlot)
	}
	return s.slot, nil
}

// takeSlot ends the session of a previous holder still attached to the
// slot (frozen, or its lease expired): this relay holds the group's lease
// with a newer token, so that streamer has been superseded.
func (s *Relay) takeSlot(ctx context.Context) error {
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
