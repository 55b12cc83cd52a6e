package dialects

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"time"

	"github.com/sqlcoord/sqlcoord/internal/backoff"
)

// mysqlKeyParts partitions coord_idempotency by RANGE (period) on MariaDB:
// the legacy partition VALUES LESS THAN (1) holds the keys written before
// the switch, one partition per period follows (the first also takes the
// unused periods between 1 and it), and a last partition VALUES LESS THAN
// MAXVALUE takes periods no range covers. Partition changes wait for the
// table's metadata lock at most mysqlPartWait, like the outbox's.
type mysqlKeyParts struct{ p mysqlPartitions }

const mysqlKeysCatchAll = "coord_idempotency_pmax"

var mysqlKeyPartName = regexp.MustCompile(`^coord_idempotency_p[0-9]+$`)

// mysqlKeyNow: see pgKeyNow.
const mysqlKeyNow = `SELECT FLOOR(TIMESTAMPDIFF(MICROSECOND, '1970-01-01', UTC_TIMESTAMP(6)) / period_us), period_us, legacy_until
FROM coord_periods WHERE tbl = 'coord_idempotency'`

func (k mysqlKeyParts) KeyPartitions(ctx context.Context, x Executor) (KeyLayout, error) {
	var periods int
	if err := x.QueryRow(ctx, `SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'coord_periods'`).Scan(&periods); err != nil {
		return KeyLayout{}, k.p.d.Classify(err)
	}
	parts, err := k.p.partitionsOf(ctx, x, "coord_idempotency")
	if errors.Is(err, ErrNoSchema) || (err == nil && periods == 0) {
		return KeyLayout{}, fmt.Errorf("%w: no coord_idempotency or coord_periods table (schema 29; run sqlcoord migrate up)", ErrNoSchema)
	}
	if errors.Is(err, ErrNotPartitioned) {
		return KeyLayout{}, ErrKeysNotPartitioned
	}
	if err != nil {
		return KeyLayout{}, err
	}
	l := KeyLayout{Parts: parts}
	var us int64
	if err := x.QueryRow(ctx, mysqlKeyNow).Scan(&l.Current, &us, &l.LegacyUntil); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			// PartitionKeys stopped between its switch and recording the
			// periods: claims still write period 0 only (safe; the legacy
			// partition takes them), and PartitionKeys run again finishes
			return KeyLayout{}, ErrKeysNotPartitioned
		}
		return KeyLayout{}, k.p.d.Classify(err)
	}
	l.Period = time.Duration(us) * time.Microsecond
	return l, nil
}

// partBusy spaces the retries of a step of a partitioning operation that
// failed for want of a lock: a step of PartitionKeys rather than the
// whole (its copy can take minutes), the removal of an Enable's leftovers.
var partBusy = backoff.Policy{Base: 50 * time.Millisecond, Max: time.Second, Jitter: backoff.Full}

func (k mysqlKeyParts) PartitionKeys(ctx context.Context, x Executor, begin Begin, period time.Duration, ahead int) error {
	_, err := k.KeyPartitions(ctx, x)
	switch {
	case err == nil:
		return ErrKeysPartitioned
	case !errors.Is(err, ErrKeysNotPartitioned):
		return err
	}
	if _, err := k.p.partitionsOf(ctx, x, "coord_idempotency"); err == nil {
		return k.recordPeriods(ctx, x, period) // switched, not recorded
	}
	var cur int64
	if err := x.QueryRow(ctx, `SELECT FLOOR(TIMESTAMPDIFF(MICROSECOND, '1970-01-01', UTC_TIMESTAMP(6)) / ?)`, period.Microseconds()).Scan(&cur); err != nil {
		return k.p.d.Classify(err)
	}
	// 1. The partitioned table, made beside the live one.
	parts := []string{fmt.Sprintf("PARTITION %s VALUES LESS THAN (1)", keyPartName(0))}
	for q := cur; q <= cur+int64(ahead); q++ {
		parts = append(parts, fmt.Sprintf("PARTITION %s VALUES LESS THAN (%d)", keyPartName(q), q+1))
	}
	parts = append(parts, "PARTITION "+mysqlKeysCatchAll+" VALUES LESS THAN MAXVALUE")
	cols, err := k.p.columnsOf(ctx, x, "coord_idempotency")
	if err != nil {
		return err
	}
	mirror := mysqlKeyMirror(cols)
	swapped := false
	defer func() {
		if !swapped { // nothing of the attempt stays
			c := context.WithoutCancel(ctx)
			for _, t := range mirror {
				x.Exec(c, `DROP TRIGGER IF EXISTS `+t.name)
			}
			x.Exec(c, `DROP TABLE IF EXISTS coord_idempotency_new`)
		}
	}()
	for _, s := range []string{
		`DROP TABLE IF EXISTS coord_idempotency_new`,
		`CREATE TABLE coord_idempotency_new LIKE coord_idempotency`,
		// no default for period: an insert that omits it (a plain
		// table's claim, an older release's) fails on the partitioned
		// table instead of claiming period 0 alone
		`ALTER TABLE coord_idempotency_new DROP PRIMARY KEY, ADD PRIMARY KEY (scope, idem_key, period), ALTER COLUMN period DROP DEFAULT`,
		`ALTER TABLE coord_idempotency_new PARTITION BY RANGE (period) (` + strings.Join(parts, ", ") + `)`,
	} {
		if _, err := x.Exec(ctx, s); err != nil {
			return k.p.d.Classify(err)
		}
	}
	// 2. Triggers mirror every later change of the live table into the
	// new one (creating one waits for the table's metadata lock, so it
	// is tried again while requests hold it) ...
	for _, t := range mirror {
		if err := k.busyRetry(ctx, func() error {
			_, err := x.Exec(ctx, `SET STATEMENT lock_wait_timeout = 1 FOR `+t.create)
			return err
		}); err != nil {
			return err
		}
	}
	// ... while the rows there are copied, a thousand at a time in key
	// order. The copy reads with share locks: a request changing a row
	// waits for the batch to commit, and its trigger then changes the
	// copy; a row already mirrored is not copied again.
	last := []any{"", ""}
	list := strings.Join(cols, ", ")
	for {
		var scope, key sql.NullString
		err := x.QueryRow(ctx, `SELECT scope, idem_key FROM coord_idempotency WHERE scope > ? OR (scope = ? AND idem_key > ?)
ORDER BY scope, idem_key LIMIT 1 OFFSET 999`, last[0], last[0], last[1]).Scan(&scope, &key)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return k.p.d.Classify(err)
		}
		bound, args := "", []any{last[0], last[0], last[1]}
		if scope.Valid {
			bound, args = ` AND (scope < ? OR (scope = ? AND idem_key <= ?))`, append(args, scope.String, scope.String, key.String)
		}
		if err := k.busyRetry(ctx, func() error {
			_, err := x.Exec(ctx, `INSERT IGNORE INTO coord_idempotency_new (`+list+`) SELECT `+list+` FROM coord_idempotency
WHERE (scope > ? OR (scope = ? AND idem_key > ?))`+bound+` LOCK IN SHARE MODE`, args...)
			return err
		}); err != nil {
			return err
		}
		if !scope.Valid {
			break
		}
		last = []any{scope.String, key.String}
	}
	// 3. One RENAME swaps the tables (it waits for the transactions
	// still on the live table, their changes mirrored), then the periods
	// are recorded: claims in between write period 0 only, which the
	// legacy partition takes and which the claims after meet.
	if err := k.busyRetry(ctx, func() error {
		_, err := x.Exec(ctx, `SET STATEMENT lock_wait_timeout = 2 FOR RENAME TABLE coord_idempotency TO coord_idempotency_old, coord_idempotency_new TO coord_idempotency`)
		return err
	}); err != nil {
		return err
	}
	swapped = true
	for _, t := range mirror {
		if _, err := x.Exec(ctx, `DROP TRIGGER IF EXISTS `+t.name); err != nil {
			return k.p.d.Classify(err)
		}
	}
	if err := k.recordPeriods(ctx, x, period); err != nil {
		return err
	}
	_, err = x.Exec(ctx, `DROP TABLE coord_idempotency_old`)
	return k.p.d.Classify(err)
}

// recordPeriods starts the claims of two periods: coord_periods' row, with
// period 0 claimed too until the end of the next period.
func (k mysqlKeyParts) recordPeriods(ctx context.Context, x Executor, period time.Duration) error {
	_, err := x.Exec(ctx, `INSERT INTO coord_periods (tbl, period_us, legacy_until)
SELECT 'coord_idempotency', ?, FLOOR(TIMESTAMPDIFF(MICROSECOND, '1970-01-01', UTC_TIMESTAMP(6)) / ?) + 1`, period.Microseconds(), period.Microseconds())
	return k.p.d.Classify(err)
}

// busyRetry runs step until it does not fail for want of a lock, for
// about a minute.
func (k mysqlKeyParts) busyRetry(ctx context.Context, step func() error) error {
	const tries = 61
	locked := func(err error) bool {
		return errors.Is(err, ErrLockTimeout) || errors.Is(err, ErrDeadlock) || errors.Is(err, ErrLocked)
	}
	err := partBusy.Retry(ctx, tries, locked, func() error { return k.p.d.Classify(step()) })
	if locked(err) {
		return fmt.Errorf("%w: %w", ErrPartitionBusy, err)
	}
	return err
}

// mysqlKeyMirror: see mysqlMirrorTriggers; the rows are told apart by
// their primary key (scope, idem_key, period).
func mysqlKeyMirror(cols []string) []mysqlTrigger {
	var news, sets []string
	for _, c := range cols {
		news = append(news, "NEW."+c)
		sets = append(sets, c+" = NEW."+c)
	}
	list := strings.Join(cols, ", ")
	where := ` WHERE scope = OLD.scope AND idem_key = OLD.idem_key AND period = OLD.period`
	return []mysqlTrigger{
		{"coord_idempotency_mirror_ins", `CREATE TRIGGER coord_idempotency_mirror_ins AFTER INSERT ON coord_idempotency FOR EACH ROW
REPLACE INTO coord_idempotency_new (` + list + `) VALUES (` + strings.Join(news, ", ") + `)`},
		{"coord_idempotency_mirror_upd", `CREATE TRIGGER coord_idempotency_mirror_upd AFTER UPDATE ON coord_idempotency FOR EACH ROW
UPDATE coord_idempotency_new SET ` + strings.Join(sets, ", ") + where},
		{"coord_idempotency_mirror_del", `CREATE TRIGGER coord_idempotency_mirror_del AFTER DELETE ON coord_idempotency FOR EACH ROW
DELETE FROM coord_idempotency_new` + where},
	}
}

func (k mysqlKeyParts) ExtendKeys(ctx context.Context, x Executor, _ Begin, ahead int) ([]string, error) {
	l, err := k.KeyPartitions(ctx, x)
	if err != nil {
		return nil, err
	}
	from := int64(1)
	for _, p := range l.Parts {
		if !p.CatchAll && p.To > from {
			from = p.To
		}
	}
	var made []string
	for q := max(from, l.Current); q <= l.Current+int64(ahead); q++ {
		// the MAXVALUE partition is split (the rows it holds, none while
		// partitions are made ahead, move into the new range)
		name := keyPartName(q)
		err := k.p.alterTable(ctx, x, "coord_idempotency", fmt.Sprintf(`REORGANIZE PARTITION %s INTO (PARTITION %s VALUES LESS THAN (%d), PARTITION %s VALUES LESS THAN MAXVALUE)`,
			mysqlKeysCatchAll, name, q+1, mysqlKeysCatchAll))
		if partitionRaced(err) {
			return made, nil // another RollKeys made it (and the ones after)
		} else if err != nil {
			return made, err
		}
		made = append(made, name)
	}
	return made, nil
}

// DropKeys takes a partition's rows out of the live table before their
// files go: EXCHANGE PARTITION swaps the partition with an empty table of
// the same shape (a rename of files under the table's metadata lock, which
// claims wait for), the emptied partition is dropped, and then the table
// now holding its rows, with nothing waiting on it. A DROP PARTITION of
// the full partition deleted its files under that lock: every claim
// waited for it. A drop stopped halfway leaves that table behind; a later
// DropKeys drops it.
func (k mysqlKeyParts) DropKeys(ctx context.Context, x Executor, _ Begin, part Partition) error {
	if part.CatchAll || !mysqlKeyPartName.MatchString(part.Name) {
		return fmt.Errorf("sqlcoord: %q is not a partition to drop", part.Name)
	}
	// the spare's name is the partition's and this attempt's: two
	// RollKeys dropping one partition at once each use their own
	spare := fmt.Sprintf("%s%s_%08x", mysqlKeySparePrefix, strings.TrimPrefix(part.Name, "coord_idempotency_"), rand.Uint32())
	if err := k.dropSpares(ctx, x, spare); err != nil {
		return err
	}
	// the spare goes however this ends, a cancelled ctx included (a
	// killed process leaves it to the ten-minute rule of dropSpares)
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		x.Exec(cctx, "DROP TABLE IF EXISTS `"+spare+"`")
	}()
	for _, s := range []string{
		`CREATE TABLE ` + spare + ` LIKE coord_idempotency`,
		`ALTER TABLE ` + spare + ` REMOVE PARTITIONING`,
	} {
		if _, err := x.Exec(ctx, s); err != nil {
			return k.p.d.Classify(err)
		}
	}
	// another RollKeys may have dropped the partition meanwhile
	err := k.p.alterTable(ctx, x, "coord_idempotency", `EXCHANGE PARTITION `+part.Name+` WITH TABLE `+spare)
	if err == nil {
		err = k.p.alterTable(ctx, x, "coord_idempotency", `DROP PARTITION `+part.Name)
	}
	if err != nil && !partitionRaced(err) {
		return err
	}
	return nil
}

// mysqlKeySparePrefix names the tables DropKeys moves a partition's rows
// into before it drops them.
const mysqlKeySparePrefix = "coord_idempotency_gone_"

// dropSpares drops own, the table this DropKeys will move rows into, and
// the ones drops stopped halfway left behind: created over ten minutes ago
// (a drop in progress elsewhere is seconds old).
func (k mysqlKeyParts) dropSpares(ctx context.Context, x Executor, own string) error {
	rows, err := x.Query(ctx, `SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME LIKE ?
AND (TABLE_NAME = ? OR CREATE_TIME < NOW() - INTERVAL 10 MINUTE)`, strings.ReplaceAll(mysqlKeySparePrefix, "_", `\_`)+"%", own)
	if err != nil {
		return k.p.d.Classify(err)
	}
	var spares []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			rows.Close()
			return k.p.d.Classify(err)
		}
		spares = append(spares, name)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return k.p.d.Classify(err)
	}
	for _, name := range spares {
		if !strings.HasPrefix(name, mysqlKeySparePrefix) {
			continue
		}
		if _, err := x.Exec(ctx, "DROP TABLE IF EXISTS `"+name+"`"); err != nil {
			return k.p.d.Classify(err)
		}
	}
	return nil
}

// PurgeKeys: MariaDB's ranges are contiguous and the MAXVALUE partition
// only takes periods after the newest range, which ExtendKeys moves into
// ranges: nothing to purge.
func (k mysqlKeyParts) PurgeKeys(context.Context, Executor) (int64, error) { return 0, nil }
