package dialects

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// mysqlPartitions partitions coord_outbox by RANGE (id) on MariaDB: a
// last partition VALUES LESS THAN MAXVALUE takes ids no range covers, and
// partition changes wait for the table's metadata lock at most
// mysqlPartWait (ALTER TABLE … WAIT): producers that arrive meanwhile
// queue behind the change, so it gives up early (ErrPartitionBusy) rather
// than hold them. NOWAIT would never get the lock on a busy outbox (some
// producer's transaction always holds the table). MySQL 8 has no WAIT
// clause and is not offered (Debian ships no MySQL 8 server to test it).
type mysqlPartitions struct{ d *Dialect }

// mysqlPartitionMargin: see pgPartitionMargin.
const mysqlPartitionMargin = 1_000_000_000

// mysqlHistory is the table Partition sets the published history aside
// in: MariaDB cannot make a table a partition without reading every row
// of it under the table's lock (EXCHANGE PARTITION validates), so the
// history stays a table of its own until DropHistory drops it whole.
const mysqlHistory = "coord_outbox_legacy"

// mysqlCatchAll is the MAXVALUE partition's name.
const mysqlCatchAll = "coord_outbox_pmax"

var mysqlPartName = regexp.MustCompile(`^coord_outbox_p[0-9]+$`)

func (p mysqlPartitions) Partitions(ctx context.Context, x Executor) (Layout, error) {
	parts, err := p.partitionsOf(ctx, x, "coord_outbox")
	if err != nil {
		return Layout{}, err
	}
	l := Layout{Parts: parts}
	var next sql.NullInt64
	var hist int
	err = x.QueryRow(ctx, `SELECT (SELECT AUTO_INCREMENT FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'coord_outbox'),
  (SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = '`+mysqlHistory+`')`).Scan(&next, &hist)
	if err != nil {
		return Layout{}, p.d.Classify(err)
	}
	if next.Int64 > 0 {
		l.Issued = next.Int64 - 1
	}
	if hist > 0 {
		l.History = mysqlHistory
	}
	return l, nil
}

// partitionsOf lists a partitioned table's partitions with their ranges
// in order, the MAXVALUE one last: ErrNotPartitioned when it has none,
// ErrNoSchema when there is no such table.
func (p mysqlPartitions) partitionsOf(ctx context.Context, x Executor, table string) ([]Partition, error) {
	rows, err := x.Query(ctx, `SELECT COALESCE(PARTITION_NAME, ''), COALESCE(PARTITION_DESCRIPTION, ''), COALESCE(TABLE_ROWS, 0)
FROM information_schema.PARTITIONS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? ORDER BY PARTITION_ORDINAL_POSITION`, table)
	if err != nil {
		return nil, p.d.Classify(err)
	}
	defer rows.Close()
	var parts []Partition
	seen := false
	from := int64(math.MinInt64)
	for rows.Next() {
		seen = true
		var part Partition
		var desc string
		if err := rows.Scan(&part.Name, &desc, &part.Rows); err != nil {
			return nil, p.d.Classify(err)
		}
		if part.Name == "" {
			return nil, ErrNotPartitioned
		}
		part.From = from
		if desc == "MAXVALUE" {
			part.To, part.CatchAll = math.MaxInt64, true
		} else if part.To, err = strconv.ParseInt(desc, 10, 64); err != nil {
			return nil, fmt.Errorf("sqlcoord: partition %s: bound %q: %w", part.Name, desc, err)
		}
		from = part.To
		parts = append(parts, part)
	}
	if err := rows.Err(); err != nil {
		return nil, p.d.Classify(err)
	}
	if !seen {
		return nil, fmt.Errorf("%w: no %s table (run sqlcoord migrate up)", ErrNoSchema, table)
	}
	return parts, nil
}

// mysqlPartWait bounds an ALTER's wait for coord_outbox's metadata lock,
// in seconds: MariaDB counts it in whole seconds (WAIT 0.5 is NOWAIT).
const mysqlPartWait = "1"

// partitionRaced reports an ALTER that failed because another process
// changed the same partitions first: the partition it drops or exchanges
// is gone (1507, 1735), or the one it makes exists (1517). Rolls run from
// several processes at once; what the other did is what this one meant to
// do.
func partitionRaced(err error) bool {
	n, _, ok := mysqlNumber(err)
	return ok && (n == 1507 || n == 1735 || n == 1517)
}

// alter runs an ALTER TABLE coord_outbox WAIT mysqlPartWait …:
// ErrPartitionBusy when transactions kept the table that long (the caller
// tries again).
func (p mysqlPartitions) alter(ctx context.Context, x Executor, alter string) error {
	return p.alterTable(ctx, x, "coord_outbox", alter)
}

// alterTable runs ALTER TABLE table WAIT mysqlPartWait alter.
func (p mysqlPartitions) alterTable(ctx context.Context, x Executor, table, alter string) error {
	_, err := x.Exec(ctx, `ALTER TABLE `+table+` WAIT `+mysqlPartWait+` `+alter)
	if n, _, ok := mysqlNumber(err); ok && n == 1508 {
		// "cannot remove all partitions": seen while another process
		// changed the partitions (there is always a catch-all left);
		// nothing was dropped, the caller tries again
		return fmt.Errorf("%w: %w", ErrPartitionBusy, p.d.Classify(err))
	}
	if c := p.d.Classify(err); errors.Is(c, ErrLockTimeout) || errors.Is(c, ErrLocked) {
		return fmt.Errorf("%w: %w", ErrPartitionBusy, c)
	} else if err != nil {
		return c
	}
	return nil
}

func (p mysqlPartitions) Partition(ctx context.Context, x Executor, begin Begin, size int64, ahead int) error {
	if _, err := p.Partitions(ctx, x); err == nil {
		return ErrPartitioned
	} else if !errors.Is(err, ErrNotPartitioned) {
		return err
	}
	var ids, hist int
	if err := x.QueryRow(ctx, `SELECT
  (SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'coord_outbox_ids'),
  (SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = '`+mysqlHistory+`')`).Scan(&ids, &hist); err != nil {
		return p.d.Classify(err)
	}
	if ids == 0 {
		return fmt.Errorf("%w: no coord_outbox_ids table (schema 28; run sqlcoord migrate up)", ErrNoSchema)
	}
	if hist > 0 {
		return fmt.Errorf("sqlcoord: %s exists: the history of an earlier partitioning; drop it (or rename it) first", mysqlHistory)
	}
	var next sql.NullInt64
	if err := x.QueryRow(ctx, `SELECT AUTO_INCREMENT FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'coord_outbox'`).Scan(&next); err != nil {
		return p.d.Classify(err)
	}
	end := next.Int64 + mysqlPartitionMargin
	// 1. The partitioned table, made beside the live one: its first
	// partition takes the ids issued until the switch (the pending
	// messages copied over keep theirs), the next ones start at end.
	parts := []string{fmt.Sprintf("PARTITION %s VALUES LESS THAN (%d)", partitionName(math.MinInt64), end)}
	for i := 0; i <= ahead; i++ {
		from := end + int64(i)*size
		parts = append(parts, fmt.Sprintf("PARTITION %s VALUES LESS THAN (%d)", partitionName(from), from+size))
	}
	parts = append(parts, "PARTITION "+mysqlCatchAll+" VALUES LESS THAN MAXVALUE")
	cols, err := p.columnsOf(ctx, x, "coord_outbox")
	if err != nil {
		return err
	}
	mirror := mysqlMirrorTriggers(cols)
	// Stopped or failed before the swap, nothing of the attempt stays
	// (the mirror triggers would keep writing into a table nobody reads).
	swapped := false
	defer func() {
		if !swapped {
			c := context.WithoutCancel(ctx)
			for _, t := range mirror {
				x.Exec(c, `DROP TRIGGER IF EXISTS `+t.name)
			}
			x.Exec(c, `DROP TABLE IF EXISTS coord_outbox_new`)
		}
	}()
	for _, s := range []string{
		`DROP TABLE IF EXISTS coord_outbox_new`,
		`CREATE TABLE coord_outbox_new LIKE coord_outbox`,
		// a partitioned table's unique keys must hold its partition
		// key: msg_id is unique through coord_outbox_ids instead
		`ALTER TABLE coord_outbox_new DROP INDEX coord_outbox_msg_id, ADD INDEX coord_outbox_msg_id (msg_id)`,
		`ALTER TABLE coord_outbox_new PARTITION BY RANGE (id) (` + strings.Join(parts, ", ") + `)`,
		fmt.Sprintf(`ALTER TABLE coord_outbox_new AUTO_INCREMENT = %d`, end),
	} {
		if _, err := x.Exec(ctx, s); err != nil {
			return p.d.Classify(err)
		}
	}
	// 2. The switch. Under LOCK TABLES (producers and relays wait):
	// what is not published yet is copied with its ids, and triggers
	// start mirroring every later change of the live table into the new
	// one. After UNLOCK, one RENAME swaps the tables: it waits for the
	// transactions still on the live table (their changes mirrored), and
	// nobody ever finds coord_outbox missing (a rename under LOCK TABLES
	// would leave the name empty for an instant).
	tx, err := begin(ctx)
	if err != nil {
		return p.d.Classify(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, `SET @sqlcoord_lwt = @@SESSION.lock_wait_timeout, SESSION lock_wait_timeout = 2`); err != nil {
		return p.d.Classify(err)
	}
	defer tx.Exec(context.WithoutCancel(ctx), `SET SESSION lock_wait_timeout = @sqlcoord_lwt`)
	busy := func(err error) error {
		if c := p.d.Classify(err); errors.Is(c, ErrLockTimeout) {
			return fmt.Errorf("%w: %w", ErrPartitionBusy, c)
		}
		return p.d.Classify(err)
	}
	if _, err := tx.Exec(ctx, `LOCK TABLES coord_outbox WRITE, coord_outbox_new WRITE`); err != nil {
		return busy(err)
	}
	var top sql.NullInt64
	err = tx.QueryRow(ctx, `SELECT MAX(id) FROM coord_outbox`).Scan(&top)
	if err == nil && top.Int64 >= end {
		err = fmt.Errorf("sqlcoord: coord_outbox issued id %d, past the %d ids left for the switch: try again", top.Int64, mysqlPartitionMargin)
	}
	if err == nil {
		_, err = tx.Exec(ctx, `INSERT INTO coord_outbox_new SELECT * FROM coord_outbox WHERE state <> 'published'`)
	}
	for _, t := range mirror {
		if err == nil {
			_, err = tx.Exec(ctx, t.create)
		}
	}
	tx.Exec(context.WithoutCancel(ctx), `UNLOCK TABLES`)
	if err == nil {
		_, err = tx.Exec(ctx, `RENAME TABLE coord_outbox TO `+mysqlHistory+`, coord_outbox_new TO coord_outbox`)
	}
	if err != nil {
		return busy(err)
	}
	swapped = true
	for _, t := range mirror {
		if _, err := x.Exec(ctx, `DROP TRIGGER IF EXISTS `+t.name); err != nil {
			return p.d.Classify(err)
		}
	}
	tx.Commit(ctx)
	// 3. The moved rows leave the history (which now only waits to be
	// dropped whole).
	if _, err := x.Exec(ctx, `DELETE FROM `+mysqlHistory+` WHERE state <> 'published'`); err != nil {
		return p.d.Classify(err)
	}
	return nil
}

// columnsOf are a table's columns in table order.
func (p mysqlPartitions) columnsOf(ctx context.Context, x Executor, table string) ([]string, error) {
	rows, err := x.Query(ctx, `SELECT COLUMN_NAME FROM information_schema.COLUMNS
WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION`, table)
	if err != nil {
		return nil, p.d.Classify(err)
	}
	defer rows.Close()
	var cols []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			return nil, p.d.Classify(err)
		}
		if !mysqlColumn.MatchString(c) {
			return nil, fmt.Errorf("sqlcoord: %s has a column %q sqlcoord did not make", table, c)
		}
		cols = append(cols, c)
	}
	return cols, p.d.Classify(rows.Err())
}

var mysqlColumn = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

type mysqlTrigger struct{ name, create string }

// mysqlMirrorTriggers copy every insert, update and delete of the live
// coord_outbox into coord_outbox_new while Partition switches them.
func mysqlMirrorTriggers(cols []string) []mysqlTrigger {
	var news, sets []string
	for _, c := range cols {
		news = append(news, "NEW."+c)
		sets = append(sets, c+" = NEW."+c)
	}
	list := strings.Join(cols, ", ")
	return []mysqlTrigger{
		{"coord_outbox_mirror_ins", `CREATE TRIGGER coord_outbox_mirror_ins AFTER INSERT ON coord_outbox FOR EACH ROW
INSERT INTO coord_outbox_new (` + list + `) VALUES (` + strings.Join(news, ", ") + `)`},
		{"coord_outbox_mirror_upd", `CREATE TRIGGER coord_outbox_mirror_upd AFTER UPDATE ON coord_outbox FOR EACH ROW
UPDATE coord_outbox_new SET ` + strings.Join(sets, ", ") + ` WHERE id = OLD.id`},
		{"coord_outbox_mirror_del", `CREATE TRIGGER coord_outbox_mirror_del AFTER DELETE ON coord_outbox FOR EACH ROW
DELETE FROM coord_outbox_new WHERE id = OLD.id`},
	}
}

func (p mysqlPartitions) Extend(ctx context.Context, x Executor, _ Begin, ahead int) ([]string, error) {
	l, err := p.Partitions(ctx, x)
	if err != nil {
		return nil, err
	}
	from, size, above := extendFrom(l)
	n := ahead - above
	if from <= l.Issued && size > 0 {
		// ids outran the partitions: the MAXVALUE partition holds the
		// ones above the newest range, and the ranges made now take
		// them over before reaching ahead of the ids
		n = ahead + int((l.Issued-from)/size) + 1
	}
	if size == 0 || n <= 0 {
		return nil, nil
	}
	var made []string
	for i := 0; i < n; i++ {
		// The MAXVALUE partition is split: the rows it holds (none
		// while the ranges stay ahead of the ids) are copied into the
		// new range, which keeps it contiguous with the one before.
		name := partitionName(from)
		err := p.alter(ctx, x, fmt.Sprintf(`REORGANIZE PARTITION %s INTO (PARTITION %s VALUES LESS THAN (%d), PARTITION %s VALUES LESS THAN MAXVALUE)`,
			mysqlCatchAll, name, from+size, mysqlCatchAll))
		if partitionRaced(err) {
			return made, nil // another Roll made it (and the ones after)
		} else if err != nil {
			return made, err
		}
		made = append(made, name)
		from += size
	}
	return made, nil
}

func (p mysqlPartitions) Drop(ctx context.Context, x Executor, begin Begin, part Partition, before time.Duration) (string, error) {
	if part.CatchAll {
		return "the catch-all partition is never dropped", nil
	}
	if !mysqlPartName.MatchString(part.Name) {
		return "", fmt.Errorf("sqlcoord: %q is not a partition name", part.Name)
	}
	// The checks read with share locks: they wait for every
	// uncommitted row in the partition (an insert that took an id of
	// its range, a relay publishing one) and see it committed. After
	// them nothing can make a row of this partition pending again: its
	// ids are all issued, and a published message stays published.
	tx, err := begin(ctx)
	if err != nil {
		return "", p.d.Classify(err)
	}
	var unfinished, young int64
	var next sql.NullInt64
	err = tx.QueryRow(ctx, `SELECT COUNT(*) FROM coord_outbox PARTITION (`+part.Name+`) FORCE INDEX (coord_outbox_due)
WHERE state IN ('pending', 'dead') LOCK IN SHARE MODE`).Scan(&unfinished)
	if err == nil {
		err = tx.QueryRow(ctx, `SELECT COUNT(*) FROM coord_outbox PARTITION (`+part.Name+`) FORCE INDEX (coord_outbox_published)
WHERE state = 'published' AND published_at >= UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND`, before.Microseconds()).Scan(&young)
	}
	if err == nil {
		err = tx.QueryRow(ctx, `SELECT AUTO_INCREMENT FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'coord_outbox'`).Scan(&next)
	}
	if err == nil {
		err = tx.Commit(ctx)
	} else {
		tx.Rollback(context.WithoutCancel(ctx))
	}
	if partitionRaced(err) {
		return "", nil // another Roll dropped it meanwhile
	}
	if c := p.d.Classify(err); errors.Is(c, ErrDeadlock) || errors.Is(c, ErrLockTimeout) {
		// the share-locked check met a relay's or a producer's locks:
		// it read and changed nothing; the caller tries again
		return "", fmt.Errorf("%w: %w", ErrPartitionBusy, c)
	} else if err != nil {
		return "", c
	}
	switch {
	case next.Int64-1 < part.To-1:
		return "ids of its range are still to be issued", nil
	case unfinished > 0:
		return "a message in it is pending or dead-lettered", nil
	case young > 0:
		return "a message in it was published too recently", nil
	}
	if err := p.alter(ctx, x, `DROP PARTITION `+part.Name); err != nil && !partitionRaced(err) {
		return "", err
	}
	return "", nil
}

func (p mysqlPartitions) DropHistory(ctx context.Context, x Executor, before time.Duration) (string, error) {
	held, err := p.dropHistory(ctx, x, before)
	if n, msg, ok := mysqlNumber(err); ok && n == 1146 && strings.Contains(msg, mysqlHistory) {
		return "", nil // another Roll dropped it meanwhile
	}
	return held, err
}

func (p mysqlPartitions) dropHistory(ctx context.Context, x Executor, before time.Duration) (string, error) {
	var hist int
	if err := x.QueryRow(ctx, `SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = '`+mysqlHistory+`'`).Scan(&hist); err != nil {
		return "", p.d.Classify(err)
	}
	if hist == 0 {
		return "", nil
	}
	// rows Partition copied over but did not delete (it was stopped)
	if _, err := x.Exec(ctx, `DELETE h FROM `+mysqlHistory+` h JOIN coord_outbox o ON o.id = h.id WHERE h.state <> 'published'`); err != nil {
		return "", p.d.Classify(err)
	}
	var unfinished, young int64
	err := x.QueryRow(ctx, `SELECT COUNT(*) FROM `+mysqlHistory+` WHERE state <> 'published'`).Scan(&unfinished)
	if err == nil {
		err = x.QueryRow(ctx, `SELECT COUNT(*) FROM `+mysqlHistory+` WHERE state = 'published' AND published_at >= UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND`,
			before.Microseconds()).Scan(&young)
	}
	if err != nil {
		return "", p.d.Classify(err)
	}
	switch {
	case unfinished > 0:
		return "a message in it is pending or dead-lettered", nil
	case young > 0:
		return "a message in it was published too recently", nil
	}
	if _, err := x.Exec(ctx, `DROP TABLE IF EXISTS `+mysqlHistory); err != nil {
		return "", p.d.Classify(err)
	}
	return "", nil
}
