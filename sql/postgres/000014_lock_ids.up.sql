-- Locks without writing the row. Each lock name gets a
-- permanent integer id; TryLock / Lock take a transaction-scoped advisory
-- lock on (1936813155, id) instead of locking the row, so a transaction
-- that only locks writes no WAL and its COMMIT flushes nothing.
CREATE SEQUENCE IF NOT EXISTS coord_locks_lock_id_seq AS integer;
ALTER TABLE coord_locks ADD COLUMN IF NOT EXISTS lock_id integer;
UPDATE coord_locks SET lock_id = nextval('coord_locks_lock_id_seq') WHERE lock_id IS NULL;
ALTER TABLE coord_locks ALTER COLUMN lock_id SET DEFAULT nextval('coord_locks_lock_id_seq'),
                        ALTER COLUMN lock_id SET NOT NULL;
ALTER SEQUENCE coord_locks_lock_id_seq OWNED BY coord_locks.lock_id;
CREATE UNIQUE INDEX IF NOT EXISTS coord_locks_lock_id ON coord_locks (lock_id);

-- A name's id must never change while its lock may be held (a re-created
-- name would get another id, and two holders): rows are permanent.
CREATE OR REPLACE FUNCTION coord_locks_keep() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'coord_locks rows are permanent: a lock name''s id must not change while the lock may be held'
    USING ERRCODE = '55000';
END
$$;
DROP TRIGGER IF EXISTS coord_locks_keep ON coord_locks;
CREATE TRIGGER coord_locks_keep BEFORE DELETE OR UPDATE OF name, lock_id ON coord_locks
  FOR EACH ROW EXECUTE FUNCTION coord_locks_keep();

-- Rolling upgrade: instances older than this version lock the row
-- (SELECT … FOR UPDATE). While row_locks is true, this version takes the
-- row lock as well as the advisory lock, so old and new instances exclude
-- each other. sqlcoord.Migrate of an empty database (nothing old can run
-- there) and `sqlcoord locks protocol advisory` (once every instance runs
-- this version) set it false.
CREATE TABLE IF NOT EXISTS coord_lock_protocol (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    row_locks boolean NOT NULL
);
INSERT INTO coord_lock_protocol (row_locks) VALUES (true) ON CONFLICT DO NOTHING;
