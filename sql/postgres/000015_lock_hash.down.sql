-- Back to schema 14: every name gets a permanent id again.
ALTER TABLE coord_locks DISABLE TRIGGER coord_locks_keep;
UPDATE coord_locks SET lock_id = nextval('coord_locks_lock_id_seq') WHERE lock_id IS NULL;
ALTER TABLE coord_locks ENABLE TRIGGER coord_locks_keep;
ALTER TABLE coord_locks ALTER COLUMN lock_id SET NOT NULL;
DROP INDEX IF EXISTS coord_locks_hash;
DROP INDEX IF EXISTS coord_locks_created;
ALTER TABLE coord_lock_protocol DROP COLUMN IF EXISTS id_locks;
CREATE OR REPLACE FUNCTION coord_locks_keep() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'coord_locks rows are permanent: a lock name''s id must not change while the lock may be held'
    USING ERRCODE = '55000';
END
$$;
