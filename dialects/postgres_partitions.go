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

// pgPartitions partitions coord_outbox by RANGE (id) — declarative
// partitioning, a DEFAULT partition taking ids no range covers.
type pgPartitions struct{ d *Dialect }

// pgPartitionMargin is how far above the last issued id an unpartitioned
// table's history ends: ids keep being issued while Partition validates
// the history's range (a scan that does not block writers), and each must
// stay inside it until the switch; the first partition starts there.
const pgPartitionMargin = 1_000_000_000

// pgPartLockTimeout bounds every wait for a lock on coord_outbox: while a
// partition change waits, producers queue behind it, so it gives up
// early (ErrPartitionBusy) rather than hold them.
const pgPartLockTimeout = "200ms"

var pgBound = regexp.MustCompile(`^FOR VALUES FROM \((.+)\) TO \((.+)\)$`)

func pgBoundValue(s string, unbounded int64) (int64, error) {
	s = strings.Trim(s, "'")
	if s == "MINVALUE" || s == "MAXVALUE" {
		return unbounded, nil
	}
	return strconv.ParseInt(s, 10, 64)
}

func (p pgPartitions) Partitions(ctx context.Context, x Executor) (Layout, error) {
	var kind string
	var issued sql.NullInt64
	err := x.QueryRow(ctx, `SELECT c.relkind::text, pg_sequence_last_value(pg_get_serial_sequence('coord_outbox', 'id')::regclass)
FROM pg_class c WHERE c.oid = to_regclass('coord_outbox')`).Scan(&kind, &issued)
	if errors.Is(err, sql.ErrNoRows) {
		return Layout{}, fmt.Errorf("%w: no coord_outbox table (run sqlcoord migrate up)", ErrNoSchema)
	}
	if err != nil {
		return Layout{}, p.d.Classify(err)
	}
	if kind != "p" {
		return Layout{}, ErrNotPartitioned
	}
	l := Layout{Issued: issued.Int64}
	l.Parts, err = p.partitionsOf(ctx, x, "coord_outbox")
	return l, err
}

// partitionsOf lists a partitioned table's partitions with their ranges,
// in range order, the DEFAULT one last.
func (p pgPartitions) partitionsOf(ctx context.Context, x Executor, table string) ([]Partition, error) {
	// a partition another process detaches or drops meanwhile has no
	// bound (pg_get_expr reads the catalog as it is now): skipped
	rows, err := x.Query(ctx, `SELECT c.relname::text, pg_get_expr(c.relpartbound, c.oid), GREATEST(c.reltuples, 0)::bigint
FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = to_regclass($1)`, table)
	if err != nil {
		return nil, p.d.Classify(err)
	}
	defer rows.Close()
	var parts []Partition
	for rows.Next() {
		var part Partition
		var b sql.NullString
		if err := rows.Scan(&part.Name, &b, &part.Rows); err != nil {
			return nil, p.d.Classify(err)
		}
		if !b.Valid {
			continue
		}
		bound := b.String
		if bound == "DEFAULT" {
			part.CatchAll, part.From, part.To = true, math.MinInt64, math.MaxInt64
		} else if m := pgBound.FindStringSubmatch(bound); m != nil {
			if part.From, err = pgBoundValue(m[1], math.MinInt64); err == nil {
				part.To, err = pgBoundValue(m[2], math.MaxInt64)
			}
			if err != nil {
				return nil, fmt.Errorf("sqlcoord: partition %s: bound %q: %w", part.Name, bound, err)
			}
		} else {
			return nil, fmt.Errorf("sqlcoord: partition %s: bound %q is not a range", part.Name, bound)
		}
		parts = append(parts, part)
	}
	if err := rows.Err(); err != nil {
		return nil, p.d.Classify(err)
	}
	sortParts(parts)
	return parts, nil
}

// tx runs fn in a transaction of its own whose lock waits end after
// pgPartLockTimeout (then ErrPartitionBusy).
func (p pgPartitions) tx(ctx context.Context, begin Begin, fn func(x Executor) error) error {
	tx, err := begin(ctx)
	if err != nil {
		return p.d.Classify(err)
	}
	if _, err = tx.Exec(ctx, `SET LOCAL lock_timeout = '`+pgPartLockTimeout+`'`); err == nil {
		if err = fn(tx); err == nil {
			err = tx.Commit(ctx)
		}
	}
	if err != nil {
		tx.Rollback(context.WithoutCancel(ctx))
		if c := p.d.Classify(err); errors.Is(c, ErrLockTimeout) {
			return fmt.Errorf("%w: %w", ErrPartitionBusy, c)
		}
		return p.d.Classify(err)
	}
	return nil
}

// pgOutboxIndexes are coord_outbox's indexes as a partitioned table has
// them: the unpartitioned table's (migrations 6, 8, 18), msg_id not
// unique (a partitioned table's unique keys must hold its partition key;
// coord_outbox_ids keeps chosen ids unique), and the dead letters' (so
// that Drop finds them without reading the partition).
var pgOutboxIndexes = []string{
	`CREATE INDEX coord_outbox_due ON coord_outbox (available_at, id) WHERE state = 'pending'`,
	`CREATE INDEX coord_outbox_key ON coord_outbox (msg_key, id) WHERE state = 'pending'`,
	`CREATE INDEX coord_outbox_msg_id ON coord_outbox (msg_id)`,
	`CREATE INDEX coord_outbox_pending ON coord_outbox (id) WHERE state = 'pending'`,
	`CREATE INDEX coord_outbox_published ON coord_outbox (published_at) WHERE state = 'published'`,
	`CREATE INDEX coord_outbox_dead ON coord_outbox (id) WHERE state = 'dead'`,
}

func (p pgPartitions) Partition(ctx context.Context, x Executor, begin Begin, size int64, ahead int) error {
	if _, err := p.Partitions(ctx, x); err == nil {
		return ErrPartitioned
	} else if !errors.Is(err, ErrNotPartitioned) {
		return err
	}
	var ids bool
	if err := x.QueryRow(ctx, `SELECT to_regclass('coord_outbox_ids') IS NOT NULL`).Scan(&ids); err != nil {
		return p.d.Classify(err)
	}
	if !ids {
		return fmt.Errorf("%w: no coord_outbox_ids table (schema 28; run sqlcoord migrate up)", ErrNoSchema)
	}
	// 1. The history gets, beside its indexes, the two a partition of
	// the new table has and it lacks, built without blocking writers
	// (an invalid one a failed earlier build left is made again).
	for _, ix := range []struct{ name, def string }{
		{"coord_outbox_msg_any", `(msg_id)`},
		{"coord_outbox_dead", `(id) WHERE state = 'dead'`},
	} {
		var valid sql.NullBool
		err := x.QueryRow(ctx, `SELECT i.indisvalid FROM pg_index i WHERE i.indexrelid = to_regclass($1)`, ix.name).Scan(&valid)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return p.d.Classify(err)
		}
		if valid.Valid && valid.Bool {
			continue
		}
		if valid.Valid {
			if _, err := x.Exec(ctx, `DROP INDEX CONCURRENTLY IF EXISTS `+ix.name); err != nil {
				return p.d.Classify(err)
			}
		}
		if _, err := x.Exec(ctx, `CREATE INDEX CONCURRENTLY `+ix.name+` ON coord_outbox `+ix.def); err != nil {
			return p.d.Classify(err)
		}
	}
	// 2. The history's range: every id issued so far and the margin
	// the ids issued until the switch use. Checked for new rows at once
	// (NOT VALID), then validated for the old ones by a scan that lets
	// writers go on; ATTACH then needs no scan under its lock.
	var issued sql.NullInt64
	if err := x.QueryRow(ctx, `SELECT pg_sequence_last_value(pg_get_serial_sequence('coord_outbox', 'id')::regclass)`).Scan(&issued); err != nil {
		return p.d.Classify(err)
	}
	end := issued.Int64 + pgPartitionMargin
	// Stopped or failed from here on, the constraint goes again: left
	// on the live table, it would refuse ids past end. Armed before the
	// constraint is added: a commit the context ended may have been
	// applied all the same. Retried while the table is busy: a statement
	// of ours the context cancelled (the validation) can still hold its
	// lock for a moment on the server.
	switched := false
	defer func() {
		if !switched {
			uctx := context.WithoutCancel(ctx)
			partBusy.Retry(uctx, 20, func(err error) bool { return errors.Is(err, ErrPartitionBusy) }, func() error {
				return p.tx(uctx, begin, func(x Executor) error {
					_, err := x.Exec(uctx, `ALTER TABLE coord_outbox DROP CONSTRAINT IF EXISTS coord_outbox_history`)
					return err
				})
			})
		}
	}()
	err := p.tx(ctx, begin, func(x Executor) error {
		if _, err := x.Exec(ctx, `ALTER TABLE coord_outbox DROP CONSTRAINT IF EXISTS coord_outbox_history`); err != nil {
			return err
		}
		_, err := x.Exec(ctx, fmt.Sprintf(`ALTER TABLE coord_outbox ADD CONSTRAINT coord_outbox_history CHECK (id < %d) NOT VALID`, end))
		return err
	})
	if err != nil {
		return err
	}
	if _, err := x.Exec(ctx, `ALTER TABLE coord_outbox VALIDATE CONSTRAINT coord_outbox_history`); err != nil {
		return p.d.Classify(err)
	}
	// 3. The switch, in one transaction under one short lock: the
	// table becomes the history partition of a partitioned coord_outbox
	// with the same columns, defaults, sequence, indexes, grants and
	// publication.
	hist := partitionName(math.MinInt64)
	err = p.tx(ctx, begin, func(x Executor) error {
		grants, owner, err := pgGrantsOwner(ctx, x, "coord_outbox")
		if err != nil {
			return err
		}
		var pub bool
		if err := x.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = 'sqlcoord_outbox')`).Scan(&pub); err != nil {
			return err
		}
		stmts := []string{
			`LOCK TABLE coord_outbox IN ACCESS EXCLUSIVE MODE`,
			`ALTER TABLE coord_outbox RENAME TO ` + hist,
		}
		for _, ix := range []string{"pkey", "due", "key", "pending", "published", "dead"} {
			stmts = append(stmts, fmt.Sprintf(`ALTER INDEX coord_outbox_%s RENAME TO %s_%s`, ix, hist, ix))
		}
		stmts = append(stmts,
			`ALTER INDEX coord_outbox_msg_id RENAME TO `+hist+`_msg_id_unique`,
			`ALTER INDEX coord_outbox_msg_any RENAME TO `+hist+`_msg_id`,
			`CREATE TABLE coord_outbox (LIKE `+hist+` INCLUDING DEFAULTS) PARTITION BY RANGE (id)`,
			`ALTER TABLE coord_outbox OWNER TO `+owner,
			`ALTER TABLE coord_outbox ADD CONSTRAINT coord_outbox_pkey PRIMARY KEY (id)`)
		stmts = append(stmts, pgOutboxIndexes...)
		stmts = append(stmts,
			fmt.Sprintf(`ALTER TABLE coord_outbox ATTACH PARTITION %s FOR VALUES FROM (MINVALUE) TO (%d)`, hist, end),
			`ALTER TABLE `+hist+` DROP CONSTRAINT coord_outbox_history`,
			`ALTER SEQUENCE `+pgOutboxSeq+` OWNED BY coord_outbox.id`,
			`CREATE TABLE coord_outbox_default PARTITION OF coord_outbox DEFAULT`)
		for i := 0; i <= ahead; i++ {
			from := end + int64(i)*size
			stmts = append(stmts, fmt.Sprintf(`CREATE TABLE %s PARTITION OF coord_outbox FOR VALUES FROM (%d) TO (%d)`, partitionName(from), from, from+size))
		}
		stmts = append(stmts, fmt.Sprintf(`SELECT setval('%s', %d)`, pgOutboxSeq, end-1)) // the next id is end
		stmts = append(stmts, grants...)
		if pub {
			stmts = append(stmts, `ALTER PUBLICATION sqlcoord_outbox SET TABLE coord_outbox`,
				`ALTER PUBLICATION sqlcoord_outbox SET (publish_via_partition_root = true)`)
		}
		for _, s := range stmts {
			if _, err := x.Exec(ctx, s); err != nil {
				return fmt.Errorf("%s: %w", strings.SplitN(s, "(", 2)[0], err)
			}
		}
		return nil
	})
	switched = err == nil
	return err
}

// pgGrantsOwner reads what a table that replaces table must have again:
// the GRANTs of its privileges to roles other than the current one, and
// its owner (the role that ran the migrations and that the applications
// may rely on, also when another role converts the table; a sequence can
// only be owned by a column of a table with its owner). Run it in the
// switch's transaction.
func pgGrantsOwner(ctx context.Context, x Executor, table string) (grants []string, owner string, err error) {
	rows, err := x.Query(ctx, `SELECT format('GRANT %s ON `+table+` TO %s', privilege_type, CASE WHEN grantee = 'PUBLIC' THEN 'PUBLIC' ELSE quote_ident(grantee) END)
FROM information_schema.role_table_grants WHERE table_name = $1 AND table_schema = current_schema() AND grantee <> current_user`, table)
	if err != nil {
		return nil, "", err
	}
	for rows.Next() {
		var g string
		if err := rows.Scan(&g); err != nil {
			rows.Close()
			return nil, "", err
		}
		grants = append(grants, g)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, "", err
	}
	err = x.QueryRow(ctx, `SELECT quote_ident(pg_get_userbyid(relowner)) FROM pg_class WHERE oid = $1::regclass`, table).Scan(&owner)
	return grants, owner, err
}

// pgOutboxSeq is coord_outbox's id sequence (bigserial's, migration 6).
const pgOutboxSeq = "coord_outbox_id_seq"

func (p pgPartitions) Extend(ctx context.Context, x Executor, begin Begin, ahead int) ([]string, error) {
	l, err := p.Partitions(ctx, x)
	if err != nil {
		return nil, err
	}
	if _, size, above := extendFrom(l); size == 0 || above >= ahead {
		return nil, nil // nothing to make: no lock taken
	}
	var made []string
	err = p.tx(ctx, begin, func(x Executor) error {
		// SHARE ROW EXCLUSIVE waits for the transactions inserting into
		// coord_outbox and holds new ones (relays' reads go on) until
		// the partitions are made: no insert is on its way to DEFAULT
		// with an id the new range takes, which would fail it.
		if _, err := x.Exec(ctx, `LOCK TABLE coord_outbox IN SHARE ROW EXCLUSIVE MODE`); err != nil {
			return err
		}
		l, err := p.Partitions(ctx, x) // as it is now, under the lock
		if err != nil {
			return err
		}
		from, size, above := extendFrom(l)
		if from <= l.Issued {
			// Ids outran the ranges made ahead (nothing extended them in
			// time): DEFAULT holds the ones above the newest range, up
			// to the last issued. The new ranges start above it; the ids
			// in between stay in DEFAULT, whose rows Roll deletes once
			// published and old.
			from = l.Issued + 1
		}
		for i := above; i < ahead; i++ {
			name, lo, hi := partitionName(from), from, from+size
			// Made as a table of its own and attached: the CHECK lets
			// ATTACH skip reading it, and DEFAULT is read under its lock
			// (empty in steady state).
			for _, s := range []string{
				fmt.Sprintf(`CREATE TABLE %s (LIKE coord_outbox INCLUDING DEFAULTS)`, name),
				fmt.Sprintf(`ALTER TABLE %s ADD CONSTRAINT %s_range CHECK (id >= %d AND id < %d)`, name, name, lo, hi),
				fmt.Sprintf(`ALTER TABLE coord_outbox ATTACH PARTITION %s FOR VALUES FROM (%d) TO (%d)`, name, lo, hi),
				fmt.Sprintf(`ALTER TABLE %s DROP CONSTRAINT %s_range`, name, name),
			} {
				if _, err := x.Exec(ctx, s); err != nil {
					return err
				}
			}
			made = append(made, name)
			from = hi
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return made, nil
}

func (p pgPartitions) Drop(ctx context.Context, _ Executor, begin Begin, part Partition, before time.Duration) (string, error) {
	if part.CatchAll {
		return "the catch-all partition is never dropped", nil
	}
	if !pgIdent.MatchString(part.Name) {
		return "", fmt.Errorf("sqlcoord: %q is not a partition name", part.Name)
	}
	// Nothing writes into the partition while the check runs under
	// coord_outbox's lock (and with it every partition's): what it sees is
	// what is dropped. Each check reads one end of a partial index
	// (max(published_at) rather than a comparison with a computed time,
	// which the planner answered with a scan of the whole partition:
	// seconds under this lock at 10 M rows).
	return p.detachAndDrop(ctx, begin, "coord_outbox", part.Name, func(x Executor) (string, error) {
		var issued sql.NullInt64
		var pending, dead, young bool
		err := x.QueryRow(ctx, `SELECT pg_sequence_last_value('`+pgOutboxSeq+`'),
  EXISTS (SELECT 1 FROM `+part.Name+` WHERE state = 'pending'),
  EXISTS (SELECT 1 FROM `+part.Name+` WHERE state = 'dead'),
  COALESCE((SELECT max(published_at) FROM `+part.Name+` WHERE state = 'published') >= clock_timestamp() - $1 * interval '1 microsecond', false)`,
			before.Microseconds()).Scan(&issued, &pending, &dead, &young)
		switch {
		case err != nil:
			return "", err
		case issued.Int64 < part.To-1:
			return "ids of its range are still to be issued", nil
		case pending:
			return "a message in it is pending", nil
		case dead:
			return "a message in it is dead-lettered (requeue or cancel it)", nil
		case young:
			return "a message in it was published too recently", nil
		}
		return "", nil
	})
}

// detachAndDrop detaches partition name of parent under parent's lock,
// unless check (run under that lock) says why it is held, and drops it
// after, in a transaction of its own: the detach is a catalog change
// (milliseconds) but it waits for every transaction using the table and
// holds the next ones meanwhile, and removing the files of a large
// partition took a second at 10 M rows, which producers would otherwise
// wait for. A partition another process detached meanwhile (rolls run
// from several processes at once) is only dropped.
func (p pgPartitions) detachAndDrop(ctx context.Context, begin Begin, parent, name string, check func(x Executor) (held string, err error)) (string, error) {
	var held string
	err := p.tx(ctx, begin, func(x Executor) error {
		if _, err := x.Exec(ctx, `LOCK TABLE `+parent+` IN ACCESS EXCLUSIVE MODE`); err != nil {
			return err
		}
		if ok, err := p.attached(ctx, x, parent, name); err != nil || !ok {
			return err
		}
		if check != nil {
			h, err := check(x)
			if err != nil || h != "" {
				held = h
				return err
			}
		}
		_, err := x.Exec(ctx, `ALTER TABLE `+parent+` DETACH PARTITION `+name)
		return err
	})
	if err != nil || held != "" {
		return held, err
	}
	return "", p.dropDetached(ctx, begin, name)
}

// attached reports whether name is still a partition of parent; run under
// parent's lock, it tells a partition another process detached (Rolls run
// from several processes at once) from one to drop.
func (p pgPartitions) attached(ctx context.Context, x Executor, parent, name string) (bool, error) {
	var ok bool
	err := x.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_inherits WHERE inhrelid = to_regclass($1) AND inhparent = to_regclass($2))`, name, parent).Scan(&ok)
	return ok, err
}

// dropDetached drops a detached partition, in a transaction of its own
// that holds no lock on the table it was detached from.
func (p pgPartitions) dropDetached(ctx context.Context, begin Begin, name string) error {
	return p.tx(ctx, begin, func(x Executor) error {
		_, err := x.Exec(ctx, `DROP TABLE IF EXISTS `+name)
		return err
	})
}

// DropHistory: on PostgreSQL the history before Partition is a partition
// like the others. What it does here is delete, in batches, the messages
// published before the cutoff that DEFAULT holds — only there after ids
// outran the partitions made ahead, and never dropped with a range.
func (p pgPartitions) DropHistory(ctx context.Context, x Executor, before time.Duration) (string, error) {
	// partitions Drop detached and was stopped before dropping
	left, err := p.detachedLeft(ctx, x, "coord_outbox")
	if err != nil {
		return "", err
	}
	for _, n := range left {
		if _, err := x.Exec(ctx, `DROP TABLE IF EXISTS `+n); err != nil {
			return "", p.d.Classify(err)
		}
	}
	for {
		n, err := x.Exec(ctx, `DELETE FROM coord_outbox_default WHERE id IN (SELECT id FROM coord_outbox_default
  WHERE state = 'published' AND published_at < clock_timestamp() - $1 * interval '1 microsecond' LIMIT 1000 FOR UPDATE SKIP LOCKED)`, before.Microseconds())
		if err != nil {
			return "", p.d.Classify(err)
		}
		if n < 1000 {
			return "", nil
		}
	}
}

// detachedLeft lists the tables named like table's partitions that are
// no partition: the ones a drop detached and was stopped before dropping.
func (p pgPartitions) detachedLeft(ctx context.Context, x Executor, table string) ([]string, error) {
	rows, err := x.Query(ctx, `SELECT c.relname::text FROM pg_class c
WHERE c.relname ~ ('^' || $1 || '_p[0-9]+$') AND c.relkind = 'r' AND NOT c.relispartition AND c.relnamespace = current_schema()::regnamespace`, table)
	if err != nil {
		return nil, p.d.Classify(err)
	}
	defer rows.Close()
	var left []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, p.d.Classify(err)
		}
		left = append(left, n)
	}
	return left, p.d.Classify(rows.Err())
}

var pgIdent = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// sortParts orders partitions by their ranges, the catch-all last.
func sortParts(ps []Partition) {
	for i := 1; i < len(ps); i++ {
		for j := i; j > 0 && partLess(ps[j], ps[j-1]); j-- {
			ps[j], ps[j-1] = ps[j-1], ps[j]
		}
	}
}

func partLess(a, b Partition) bool {
	if a.CatchAll != b.CatchAll {
		return b.CatchAll
	}
	return a.From < b.From
}
