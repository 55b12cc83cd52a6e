DROP TABLE IF EXISTS coord_lock_protocol;
DROP TRIGGER IF EXISTS coord_locks_keep ON coord_locks;
DROP FUNCTION IF EXISTS coord_locks_keep();
DROP INDEX IF EXISTS coord_locks_lock_id;
ALTER TABLE coord_locks DROP COLUMN IF EXISTS lock_id;
DROP SEQUENCE IF EXISTS coord_locks_lock_id_seq;
