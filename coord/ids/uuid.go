package ids

import (
	"crypto/rand"
	"database/sql/driver"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/sqlcoord/sqlcoord"
)

// NewUUIDv7 returns an RFC 9562 version 7 UUID: 48-bit Unix
// milliseconds, a 12-bit sub-millisecond sequence (google/uuid's layout),
// 62 random bits. Each is greater than the previous one returned in this
// process, so they insert in index order like an auto-increment key. The
// random bits come from crypto/rand, read 4 KiB at a time into a buffer of
// this package's own — what google/uuid's EnableRandPool does, but that
// switch is process-wide and a library must not flip it — under the same
// lock as the clock: random bytes wait in memory until used (each is
// cleared when handed out), fine for ids, not a place to draw secrets from.
func NewUUIDv7() (uuid.UUID, error) {
	var u uuid.UUID
	gen.mu.Lock()
	if gen.off+8 > len(gen.buf) {
		if _, err := rand.Read(gen.buf[:]); err != nil {
			gen.mu.Unlock()
			return uuid.Nil, err
		}
		gen.off = 0
	}
	copy(u[8:], gen.buf[gen.off:gen.off+8])
	clear(gen.buf[gen.off : gen.off+8])
	gen.off += 8
	nano := time.Now().UnixNano()
	milli := nano / 1e6
	now := milli<<12 + (nano-milli*1e6)>>8 // sequence 0..3906
	if now <= gen.last {
		now = gen.last + 1
	}
	gen.last = now
	gen.mu.Unlock()
	t, seq := now>>12, now&0xfff
	u[0], u[1], u[2], u[3], u[4], u[5] = byte(t>>40), byte(t>>32), byte(t>>24), byte(t>>16), byte(t>>8), byte(t)
	u[6] = 0x70 | byte(seq>>8)&0x0f
	u[7] = byte(seq)
	u[8] = u[8]&0x3f | 0x80 // variant 10
	return u, nil
}

// gen is NewUUIDv7's state: the last (milliseconds << 12 | sequence) and
// the random buffer.
var gen struct {
	mu   sync.Mutex
	last int64
	buf  [4096]byte
	off  int
}

func init() { gen.off = len(gen.buf) }

// UUIDValue returns u in the storage form of the dialect's recommended
// column type: PostgreSQL `uuid` (text form) or MySQL/MariaDB BINARY(16)
// (the 16 bytes in order, so byte order equals time order).
func UUIDValue(db sqlcoord.Base, u uuid.UUID) driver.Value { return db.Dialect().UUIDValue(u) }

// UUIDColumnType is the column type UUIDValue fits.
func UUIDColumnType(db sqlcoord.Base) string { return db.Dialect().UUIDColumnType() }
