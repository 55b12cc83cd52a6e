-- Lock names with a bounded cost. A lock is now a
-- transaction-scoped advisory lock on a 64-bit hash of the name,
-- hashtextextended(name, 1936813155): nothing is written to take it, and
-- it needs no row. Two names whose hashes collide exclude each other (a
-- chance of about n²/2⁶⁵ among n names in use), never let two holders in.
-- coord_locks keeps a row per name only so that the console can show the
-- names of held locks; rows may be deleted (CleanupLocks) once no
-- instance older than this version runs.

-- Rolling upgrade: while id_locks is true, instances of schema version 14
-- (advisory locks on the name's lock_id) may still run, so this version
-- takes that lock too. `sqlcoord locks protocol advisory` clears it (and
-- row_locks) once every instance runs this version; a fresh database
-- starts with both cleared.
ALTER TABLE coord_lock_protocol ADD COLUMN IF NOT EXISTS id_locks boolean NOT NULL DEFAULT true;

-- Rows registered under the hash protocol carry no lock_id (a sequence
-- would run out after 2³¹ names).
ALTER TABLE coord_locks ALTER COLUMN lock_id DROP NOT NULL;

-- The console finds the name of a held advisory lock by its hash;
-- CleanupLocks deletes the oldest rows first.
CREATE INDEX IF NOT EXISTS coord_locks_hash ON coord_locks (hashtextextended(name, 1936813155));
CREATE INDEX IF NOT EXISTS coord_locks_created ON coord_locks (created_at);

-- A name and its lock_id never change; an id may be given to a row that
-- has none (switching back to the id protocol). Rows may be deleted only
-- when neither older protocol is in use.
CREATE OR REPLACE FUNCTION coord_locks_keep() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    IF NOT EXISTS (SELECT 1 FROM coord_lock_protocol WHERE row_locks OR id_locks) THEN
      RETURN OLD;
    END IF;
    RAISE EXCEPTION 'coord_locks rows are permanent while instances older than schema version 15 may run (sqlcoord locks protocol advisory ends that)'
      USING ERRCODE = '55000';
  END IF;
  IF NEW.name = OLD.name AND (NEW.lock_id IS NOT DISTINCT FROM OLD.lock_id OR OLD.lock_id IS NULL) THEN
    RETURN NEW;
  END IF;
  RAISE EXCEPTION 'coord_locks rows are permanent: a lock name''s id must not change while the lock may be held'
    USING ERRCODE = '55000';
END
$$;
