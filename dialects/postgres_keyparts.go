package dialects

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// pgKeyParts partitions coord_idempotency by RANGE (period): a partition
// per period, the keys written before the switch in the legacy partition
// (periods below 1: every one of them has period 0), a DEFAULT partition
// for periods no range covers.
type pgKeyParts struct{ p pgPartitions }

// pgKeyNow is the period now by the server's clock, and its length; no row
// when coord_idempotency is not partitioned by period.
const pgKeyNow = `SELECT floor(extract(epoch FROM clock_timestamp()) * 1000000 / period_us)::bigint, period_us, legacy_until
FROM coord_periods WHERE tbl = 'coord_idempotency'`

func (k pgKeyParts) KeyPartitions(ctx context.Context, x Executor) (KeyLayout, error) {
	var kind sql.NullString
	var periods bool
	err := x.QueryRow(ctx, `SELECT (SELECT relkind::text FROM pg_class WHERE oid = to_regclass('coord_idempotency')), to_regclass('coord_periods') IS NOT NULL`).Scan(&kind, &periods)
	if err != nil {
		return KeyLayout{}, k.p.d.Classify(err)
	}
	if !kind.Valid || !periods {
		return KeyLayout{}, fmt.Errorf("%w: no coord_idempotency or coord_periods table (schema 29; run sqlcoord migrate up)", ErrNoSchema)
	}
	if kind.String != "p" {
		return KeyLayout{}, ErrKeysNotPartitioned
	}
	var l KeyLayout
	var us int64
	if err := x.QueryRow(ctx, pgKeyNow).Scan(&l.Current, &us, &l.LegacyUntil); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return KeyLayout{}, fmt.Errorf("sqlcoord: coord_idempotency is partitioned but coord_periods has no row for it")
		}
		return KeyLayout{}, k.p.d.Classify(err)
	}
	l.Period = time.Duration(us) * time.Microsecond
	l.Parts, err = k.p.partitionsOf(ctx, x, "coord_idempotency")
	return l, err
}

func (k pgKeyParts) PartitionKeys(ctx context.Context, x Executor, begin Begin, period time.Duration, ahead int) error {
	if _, err := k.KeyPartitions(ctx, x); err == nil {
		return ErrKeysPartitioned
	} else if !errors.Is(err, ErrKeysNotPartitioned) {
		return err
	}
	// 1. The unique index a partition of the new table has, built beside
	// the primary key without blocking writers (an invalid one a failed
	// earlier build left is made again).
	var valid sql.NullBool
	err := x.QueryRow(ctx, `SELECT i.indisvalid FROM pg_index i WHERE i.indexrelid = to_regclass('coord_idempotency_periods')`).Scan(&valid)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return k.p.d.Classify(err)
	}
	if valid.Valid && !valid.Bool {
		if _, err := x.Exec(ctx, `DROP INDEX CONCURRENTLY IF EXISTS coord_idempotency_periods`); err != nil {
			return k.p.d.Classify(err)
		}
	}
	if !valid.Bool {
		if _, err := x.Exec(ctx, `CREATE UNIQUE INDEX CONCURRENTLY coord_idempotency_periods ON coord_idempotency (scope, idem_key, period)`); err != nil {
			return k.p.d.Classify(err)
		}
	}
	// 2. The legacy partition's range, checked for new rows at once and
	// validated for the old ones by a scan that lets writers go on:
	// ATTACH then needs no scan under its lock. Every row of the
	// unpartitioned table has period 0, so the check holds whenever it
	// is left behind.
	err = k.p.tx(ctx, begin, func(x Executor) error {
		_, err := x.Exec(ctx, `ALTER TABLE coord_idempotency DROP CONSTRAINT IF EXISTS coord_idempotency_legacy,
  ADD CONSTRAINT coord_idempotency_legacy CHECK (period < 1) NOT VALID`)
		return err
	})
	if err != nil {
		return err
	}
	if _, err := x.Exec(ctx, `ALTER TABLE coord_idempotency VALIDATE CONSTRAINT coord_idempotency_legacy`); err != nil {
		return k.p.d.Classify(err)
	}
	// 3. The switch, in one transaction under one short lock: the table
	// becomes the legacy partition of a partitioned coord_idempotency
	// with the same columns, checks, indexes, owner and grants, and
	// coord_periods starts the claims of two periods (and of period 0,
	// for the legacy keys, until the end of the next period).
	legacy := keyPartName(0)
	return k.p.tx(ctx, begin, func(x Executor) error {
		grants, owner, err := pgGrantsOwner(ctx, x, "coord_idempotency")
		if err != nil {
			return err
		}
		stmts := []string{
			`LOCK TABLE coord_idempotency IN ACCESS EXCLUSIVE MODE`,
			`ALTER TABLE coord_idempotency RENAME TO ` + legacy,
			`ALTER TABLE ` + legacy + ` DROP CONSTRAINT coord_idempotency_pkey`,
			`ALTER INDEX coord_idempotency_periods RENAME TO ` + legacy + `_pkey`,
			`ALTER TABLE ` + legacy + ` ADD CONSTRAINT ` + legacy + `_pkey PRIMARY KEY USING INDEX ` + legacy + `_pkey`,
			`ALTER INDEX coord_idempotency_created RENAME TO ` + legacy + `_created`,
			`CREATE TABLE coord_idempotency (LIKE ` + legacy + ` INCLUDING DEFAULTS INCLUDING CONSTRAINTS) PARTITION BY RANGE (period)`,
			`ALTER TABLE coord_idempotency DROP CONSTRAINT coord_idempotency_legacy`,
			`ALTER TABLE coord_idempotency OWNER TO ` + owner,
			`ALTER TABLE coord_idempotency ADD CONSTRAINT coord_idempotency_pkey PRIMARY KEY (scope, idem_key, period)`,
			`CREATE INDEX coord_idempotency_created ON coord_idempotency (created_at)`,
			`ALTER TABLE coord_idempotency ATTACH PARTITION ` + legacy + ` FOR VALUES FROM (MINVALUE) TO (1)`,
			`ALTER TABLE ` + legacy + ` DROP CONSTRAINT coord_idempotency_legacy`,
			`CREATE TABLE coord_idempotency_default PARTITION OF coord_idempotency DEFAULT`,
		}
		for _, s := range stmts {
			if _, err := x.Exec(ctx, s); err != nil {
				return fmt.Errorf("%s: %w", strings.SplitN(s, "(", 2)[0], err)
			}
		}
		us := period.Microseconds()
		var cur int64
		if err := x.QueryRow(ctx, `INSERT INTO coord_periods (tbl, period_us, legacy_until)
SELECT 'coord_idempotency', $1::bigint, floor(extract(epoch FROM clock_timestamp()) * 1000000 / $1::bigint)::bigint + 1
RETURNING legacy_until - 1`, us).Scan(&cur); err != nil {
			return err
		}
		stmts = stmts[:0]
		for q := cur; q <= cur+int64(ahead); q++ {
			stmts = append(stmts, fmt.Sprintf(`CREATE TABLE %s PARTITION OF coord_idempotency FOR VALUES FROM (%d) TO (%d)`, keyPartName(q), q, q+1))
		}
		stmts = append(stmts, grants...)
		for _, s := range stmts {
			if _, err := x.Exec(ctx, s); err != nil {
				return fmt.Errorf("%s: %w", strings.SplitN(s, "(", 2)[0], err)
			}
		}
		return nil
	})
}

func (k pgKeyParts) ExtendKeys(ctx context.Context, x Executor, begin Begin, ahead int) ([]string, error) {
	l, err := k.KeyPartitions(ctx, x)
	if err != nil {
		return nil, err
	}
	if keysAhead(l) >= ahead {
		return nil, nil // nothing to make: no lock taken
	}
	var made []string
	err = k.p.tx(ctx, begin, func(x Executor) error {
		// SHARE ROW EXCLUSIVE waits for the transactions claiming keys
		// and holds new ones until the partitions are made: no claim is
		// on its way to DEFAULT with a period a new range takes.
		if _, err := x.Exec(ctx, `LOCK TABLE coord_idempotency IN SHARE ROW EXCLUSIVE MODE`); err != nil {
			return err
		}
		l, err := k.KeyPartitions(ctx, x) // as it is now, under the lock
		if err != nil {
			return err
		}
		from := l.Current
		for _, p := range l.Parts {
			if !p.CatchAll && p.To != math.MaxInt64 && p.To > from {
				from = p.To
			}
		}
		// periods DEFAULT holds (partitions were not made in time) get
		// no range: their rows stay there until PurgeKeys
		var top sql.NullInt64
		if err := x.QueryRow(ctx, `SELECT max(period) FROM coord_idempotency_default`).Scan(&top); err != nil {
			return err
		}
		if top.Valid && top.Int64 >= from {
			from = top.Int64 + 1
		}
		for q := from; q <= l.Current+int64(ahead); q++ {
			name := keyPartName(q)
			if _, err := x.Exec(ctx, fmt.Sprintf(`CREATE TABLE %s PARTITION OF coord_idempotency FOR VALUES FROM (%d) TO (%d)`, name, q, q+1)); err != nil {
				return err
			}
			made = append(made, name)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return made, nil
}

// keysAhead is how many partitions lie wholly after the current period.
func keysAhead(l KeyLayout) int {
	n := 0
	for _, p := range l.Parts {
		if !p.CatchAll && p.From > l.Current {
			n++
		}
	}
	return n
}

func (k pgKeyParts) DropKeys(ctx context.Context, _ Executor, begin Begin, part Partition) error {
	if part.CatchAll || !pgIdent.MatchString(part.Name) {
		return fmt.Errorf("sqlcoord: %q is not a partition to drop", part.Name)
	}
	_, err := k.p.detachAndDrop(ctx, begin, "coord_idempotency", part.Name, nil)
	return err
}

func (k pgKeyParts) PurgeKeys(ctx context.Context, x Executor) (int64, error) {
	// partitions DropKeys detached and was stopped before dropping
	left, err := k.p.detachedLeft(ctx, x, "coord_idempotency")
	if err != nil {
		return 0, err
	}
	for _, n := range left {
		if _, err := x.Exec(ctx, `DROP TABLE IF EXISTS `+n); err != nil {
			return 0, k.p.d.Classify(err)
		}
	}
	var total int64
	for {
		n, err := x.Exec(ctx, `DELETE FROM coord_idempotency_default WHERE ctid = ANY (ARRAY (SELECT d.ctid FROM coord_idempotency_default d, coord_periods p
  WHERE p.tbl = 'coord_idempotency' AND d.period < floor(extract(epoch FROM clock_timestamp()) * 1000000 / p.period_us) LIMIT 1000))`)
		total += n
		if err != nil {
			return total, k.p.d.Classify(err)
		}
		if n < 1000 {
			return total, nil
		}
	}
}
