DROP TRIGGER IF EXISTS coord_lock_protocol_sync ON coord_lock_protocol;
DROP FUNCTION IF EXISTS coord_lock_protocol_sync();
DROP FUNCTION IF EXISTS coord_lock_legacy();
