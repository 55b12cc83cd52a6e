package outbox

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/sqlcoord/sqlcoord"
	"github.com/sqlcoord/sqlcoord/internal/errs"
	"github.com/sqlcoord/sqlcoord/outbox/internal/relayutil"
)

// What a streaming relay (package outbox/pgstream) needs from a server,
// and its replication slots: plain SQL, so that checking and listing do
// not compile the replication protocol.

// ErrStreamUnsupported: the database cannot stream the outbox — not
// PostgreSQL (MySQL and MariaDB: no binlog client is available to this
// library; see docs/outbox-stream.md), wal_level is not logical, a
// standby, a user who may not replicate, or a replication connection
// through PgBouncer. `sqlcoord relay --mode auto` polls on it.
var ErrStreamUnsupported = errors.New("outbox: streaming unsupported")

// ErrUnboundedSlot: the server keeps WAL for a replication slot without
// limit (max_slot_wal_keep_size = -1), so a relay that stops for good
// would fill the disk; StreamOptions.AllowUnboundedSlot accepts it.
var ErrUnboundedSlot = errors.New("outbox: replication slot without a retention bound")

// CanStream reports why db cannot stream the outbox (nil: it can, as far
// as the server's settings show; the replication privilege is checked
// when the relay connects). The error matches ErrStreamUnsupported.
func CanStream(ctx context.Context, db sqlcoord.Base) error {
	d := db.Dialect()
	if d.Q().OutboxStreamClaim == "" {
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

// SlotName is the replication slot of group on the database named dbName.
func SlotName(group, dbName string) string {
	return fmt.Sprintf("sqlcoord_%s_%08x", group, crc32.ChecksumIEEE([]byte(dbName)))
}

// Slot is a streaming relay's replication slot as the server reports it.
type Slot struct {
	Name     string `json:"name"`
	Database string `json:"database"`
	Active   bool   `json:"active"`    // a relay is attached
	LagBytes int64  `json:"lag_bytes"` // WAL retained behind its confirmed position
	// WALStatus is the server's view: reserved, extended, unreserved or
	// lost (the slot fell behind max_slot_wal_keep_size: the group's next
	// streamer drops it, makes a new one and publishes what is pending by
	// polling).
	WALStatus string `json:"wal_status"`
	// SafeBytes is how much more WAL may be written before the slot is
	// lost (-1: no bound).
	SafeBytes int64 `json:"safe_bytes"`
}

// Slots lists the replication slots of the streaming relays of db's
// database (none on MySQL and MariaDB). Slots of other databases on the
// same server are not listed: each database's doctor and console report
// their own.
func Slots(ctx context.Context, db sqlcoord.Base) ([]Slot, error) {
	d := db.Dialect()
	if d.Q().OutboxSlots == "" {
		return nil, nil
	}
	rows, err := db.Executor().Query(ctx, d.Q().OutboxSlots)
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
	if d.Q().OutboxSlots == "" {
		return nil
	}
	if !relayutil.GroupName.MatchString(group) {
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
