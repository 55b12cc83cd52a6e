-- A restore from a disk snapshot starts a new epoch.
--
-- A snapshot of the data directory — a cloud or LVM/EBS snapshot, a copied
-- data directory, a base backup started in place — keeps the system
-- identifier and the timeline, so schema 16 took the restored server for
-- the history it was copied from, and every counter it issued after the
-- copy was taken (tokens, segment ranges, job attempts) was issued again.
-- From the inside a restored snapshot cannot be told from a restart: both
-- are a new run of the server (a postmaster started on a data directory).
-- So a history is now also one run: each recorded history remembers the
-- run it was confirmed on (boot, pg_postmaster_start_time()) and the table
-- it was recorded in (rel: coord_forks' own oid when the row was written,
-- which a pg_dump → pg_restore into the same cluster changes). The first
-- counter statement of a new run — or on a table restored from a dump —
-- starts a new epoch, its base above every recorded one and the clock's,
-- so every value issued afterwards is above anything the lost tail issued,
-- before any of it can be issued twice; and since the fencing statements
-- now refuse a token at or below the current epoch's base, a holder of a
-- token from the lost tail is refused by the row it protects.
ALTER TABLE coord_forks ADD COLUMN IF NOT EXISTS boot timestamptz;
ALTER TABLE coord_forks ADD COLUMN IF NOT EXISTS rel oid;

-- The history this server writes on now, if it is the newest: confirmed
-- for this run, so upgrading the schema starts no epoch.
UPDATE coord_forks SET boot = pg_postmaster_start_time(), rel = tableoid
WHERE NOT pg_is_in_recovery()
  AND system_id = (SELECT system_identifier FROM pg_control_system())
  AND timeline = ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint
  AND base = (SELECT max(base) FROM coord_forks);

-- Starts a new epoch for the history this server writes on (unless the
-- newest recorded one is this history in this run, why is not 'advance'
-- and at_least is met) and returns its base. The reason recorded says
-- what was found.
CREATE OR REPLACE FUNCTION coord_epoch_advance(why text, at_least bigint DEFAULT 0) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  sid  bigint := coord_system_id();
  tl   bigint := ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint;
  boot timestamptz := pg_postmaster_start_time();
  mine coord_forks%ROWTYPE;
  here oid := 'coord_forks'::regclass::oid;
  top  bigint;
  b    bigint;
BEGIN
  LOCK TABLE coord_forks IN SHARE ROW EXCLUSIVE MODE; -- one advance at a time; readers go on
  SELECT * INTO mine FROM coord_forks WHERE system_id = sid AND timeline = tl;
  SELECT max(base) INTO top FROM coord_forks;
  IF mine.base IS NOT NULL AND mine.base = top AND mine.base >= at_least AND why <> 'advance'
     AND mine.boot IS NOT DISTINCT FROM boot AND mine.rel IS NOT DISTINCT FROM here THEN
    RETURN mine.base;
  END IF;
  IF why <> 'advance' AND mine.base IS NOT NULL AND mine.base = top THEN
    IF mine.rel IS DISTINCT FROM here THEN
      why := 'coord_forks was restored from a logical dump into this cluster (its rows name another table): what was issued after the dump may have been issued';
    ELSIF mine.boot IS DISTINCT FROM boot THEN
      why := format('the server restarted (run of %s, recorded on the run of %s): a restart, a crash, or a restore from a disk snapshot or base backup, which can have lost what was issued since the copy',
                    to_char(boot AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
                    COALESCE(to_char(mine.boot AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'), 'an older schema'));
    END IF;
  END IF;
  b := GREATEST(COALESCE(top, -1) + 1, at_least,
                floor(EXTRACT(EPOCH FROM clock_timestamp() - timestamptz '2020-01-01 00:00:00+00') * 1000)::bigint << 22);
  INSERT INTO coord_forks AS f (system_id, timeline, base, reason, boot, rel) VALUES (sid, tl, b, why, boot, here)
  ON CONFLICT (system_id, timeline) DO UPDATE SET base = EXCLUDED.base, first_seen = EXCLUDED.first_seen, reason = EXCLUDED.reason,
    boot = EXCLUDED.boot, rel = EXCLUDED.rel;
  RETURN b;
END
$$;

CREATE OR REPLACE FUNCTION coord_stale_primary(epoch bigint, seen bigint) RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'this server writes in failover epoch %, older than epoch % which this client saw (an old primary after a promotion, or a copy of the database restored over a newer one): point the client at the current primary, or after a restore run sqlcoord epoch advance', epoch, seen
    USING ERRCODE = 'SC001';
END
$$;
