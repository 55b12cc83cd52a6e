-- Failover epochs that survive every fork of history.
--
-- Schema 10 took the epoch from the WAL timeline, which forks do not
-- keep unique: two standbys promoted one after the other without the
-- second re-pointed at the first both pick timeline 2; a restore into a
-- new cluster starts again at timeline 1; an isolated old primary keeps
-- writing on its timeline. Now each history the database writes on — a
-- (system identifier, timeline) pair: a promotion or a point-in-time
-- recovery changes the timeline, a restore into another cluster the
-- system identifier — gets a row here, and its epoch base is recorded,
-- not computed:
--
--   base(new history) = max(every base this database recorded + 1,
--                           milliseconds since 2020-01-01 · 2²²)
--
-- so a history that forks later gets a higher base than one that forked
-- earlier even when neither saw the other's rows (clocks assumed right to
-- within the time between two forks), and every counter that must never
-- go back — fencing tokens, segment ranges, job attempts, worker grants —
-- is floored by the base of the history that issues it. A history whose
-- row is not the one with the highest base (a server promoted again after
-- rejoining as a standby) starts a new epoch too. `sqlcoord epoch
-- advance` starts one on purpose (a failover tool's hook).

CREATE TABLE IF NOT EXISTS coord_forks (
    system_id  bigint      NOT NULL,
    timeline   bigint      NOT NULL,
    base       bigint      NOT NULL,
    first_seen timestamptz NOT NULL DEFAULT clock_timestamp(),
    reason     text        NOT NULL,
    PRIMARY KEY (system_id, timeline)
);
CREATE UNIQUE INDEX IF NOT EXISTS coord_forks_base ON coord_forks (base);

-- The server's system identifier, remembered for the session (it cannot
-- change under a connection): reading pg_control costs ~25 µs.
CREATE OR REPLACE FUNCTION coord_system_id() RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE sid bigint;
BEGIN
  SELECT system_identifier INTO sid FROM pg_control_system();
  PERFORM set_config('sqlcoord.system_id', sid::text, false);
  RETURN sid;
END
$$;

-- Starts a new epoch for the history this server writes on (unless one
-- started meanwhile and at_least is met) and returns its base.
CREATE OR REPLACE FUNCTION coord_epoch_advance(why text, at_least bigint DEFAULT 0) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  sid  bigint := coord_system_id();
  tl   bigint := ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint;
  mine bigint;
  top  bigint;
  b    bigint;
BEGIN
  LOCK TABLE coord_forks IN SHARE ROW EXCLUSIVE MODE; -- one advance at a time; readers go on
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

-- Raised when a client that saw a newer epoch reaches this server.
CREATE OR REPLACE FUNCTION coord_stale_primary(epoch bigint, seen bigint) RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'this server writes in failover epoch %, older than epoch % which this client saw on another server (split brain, or a restore)', epoch, seen
    USING ERRCODE = 'SC001';
END
$$;

-- The history the schema is installed on: epoch base as the timeline
-- epoch of schema 10 gave it ((timeline − 1) · 2⁴⁰; 0 on timeline 1), so
-- counters already issued stay below later epochs.
INSERT INTO coord_forks (system_id, timeline, base, reason)
SELECT s.system_identifier, t.tl, (t.tl - 1) << 40, 'install'
FROM pg_control_system() s,
     (SELECT ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint AS tl) t
ON CONFLICT DO NOTHING;

-- Worker grants wait out TTL + margin after an epoch's first_seen, now in
-- coord_forks.
DROP TABLE IF EXISTS coord_epochs;
