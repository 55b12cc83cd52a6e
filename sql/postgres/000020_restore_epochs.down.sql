CREATE OR REPLACE FUNCTION coord_epoch_advance(why text, at_least bigint DEFAULT 0) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  sid  bigint := coord_system_id();
  tl   bigint := ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint;
  mine bigint;
  top  bigint;
  b    bigint;
BEGIN
  LOCK TABLE coord_forks IN SHARE ROW EXCLUSIVE MODE;
  SELECT base INTO mine FROM coord_forks WHERE system_id = sid AND timeline = tl;
  SELECT max(base) INTO top FROM coord_forks;
  IF mine IS NOT NULL AND mine = top AND mine >= at_least AND why <> 'advance' THEN
    RETURN mine;
  END IF;
  b := GREATEST(COALESCE(top, -1) + 1, at_least,
                floor(EXTRACT(EPOCH FROM clock_timestamp() - timestamptz '2020-01-01 00:00:00+00') * 1000)::bigint << 22);
  INSERT INTO coord_forks AS f (system_id, timeline, base, reason) VALUES (sid, tl, b, why)
  ON CONFLICT (system_id, timeline) DO UPDATE SET base = EXCLUDED.base, first_seen = EXCLUDED.first_seen, reason = EXCLUDED.reason;
  RETURN b;
END
$$;
CREATE OR REPLACE FUNCTION coord_stale_primary(epoch bigint, seen bigint) RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'this server writes in failover epoch %, older than epoch % which this client saw on another server (split brain, or a restore)', epoch, seen
    USING ERRCODE = 'SC001';
END
$$;
ALTER TABLE coord_forks DROP COLUMN IF EXISTS rel;
ALTER TABLE coord_forks DROP COLUMN IF EXISTS boot;
