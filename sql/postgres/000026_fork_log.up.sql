-- Every history a database has had, in order (sqlcoord epoch list, Forks).
-- coord_forks keeps one row per history — a server's (system identifier,
-- timeline) — and a new epoch of the same history (a restart, a restored
-- snapshot) overwrites it: "what happened to this database" lost all but
-- the last. coord_fork_log keeps one row per epoch, never updated: the
-- function that starts an epoch appends it. Additive: a release before
-- this one calls the same function and logs too.
CREATE TABLE IF NOT EXISTS coord_fork_log (
    base       bigint      PRIMARY KEY,
    history    text        NOT NULL,
    first_seen timestamptz NOT NULL,
    reason     text        NOT NULL
);
INSERT INTO coord_fork_log (base, history, first_seen, reason)
SELECT base, system_id::text || '/' || timeline::text, first_seen, reason FROM coord_forks
ON CONFLICT (base) DO NOTHING;

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
  INSERT INTO coord_fork_log (base, history, first_seen, reason) VALUES (b, sid::text || '/' || tl::text, clock_timestamp(), why)
  ON CONFLICT (base) DO NOTHING;
  RETURN b;
END
$$;
