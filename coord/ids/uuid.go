package ids

import (
	"database/sql/driver"

	"github.com/google/uuid"

	"github.com/sqlcoord/sqlcoord/dialects"
)

// NewUUIDv7 returns an RFC 9562 version 7 UUID from google/uuid, which
// guarantees that each is greater than the previous one generated in this
// process (48-bit milliseconds plus a 12-bit sub-millisecond sequence), so
// they insert in index order like an auto-increment key.
func NewUUIDv7() (uuid.UUID, error) { return uuid.NewV7() }

// UUIDValue returns u in the storage form of the dialect's recommended
// column type: PostgreSQL `uuid` (text form) or MySQL/MariaDB BINARY(16)
// (the 16 bytes in order, so byte order equals time order).
func UUIDValue(d *dialects.Dialect, u uuid.UUID) driver.Value { return d.UUIDValue(u) }

// UUIDColumnType is the column type UUIDValue fits.
func UUIDColumnType(d *dialects.Dialect) string { return d.UUIDColumnType() }
