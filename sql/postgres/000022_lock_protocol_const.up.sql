-- A lock in one statement at the cost of the database's own advisory lock
--. The lock statement asked coord_lock_protocol on every lock
-- whether an older lock protocol is on (a table read per lock). Now it
-- calls coord_lock_legacy(): an IMMUTABLE function whose body is that
-- answer as a constant, which the planner folds into the statement. A
-- trigger on coord_lock_protocol rewrites the function whenever the row
-- changes; replacing a function invalidates every cached plan that folded
-- it (PostgreSQL's plan cache records the dependency), so every session's
-- next transaction sees the new protocol — SetLockProtocol then waits for
-- the transactions that were already open.
CREATE OR REPLACE FUNCTION coord_lock_legacy() RETURNS boolean
  LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT true $$;

CREATE OR REPLACE FUNCTION coord_lock_protocol_sync() RETURNS trigger
  LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $$
BEGIN
  EXECUTE format('CREATE OR REPLACE FUNCTION %I.coord_lock_legacy() RETURNS boolean LANGUAGE sql IMMUTABLE PARALLEL SAFE AS %L',
    TG_TABLE_SCHEMA, 'SELECT ' || CASE WHEN NEW.row_locks OR NEW.id_locks THEN 'true' ELSE 'false' END);
  RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS coord_lock_protocol_sync ON coord_lock_protocol;
CREATE TRIGGER coord_lock_protocol_sync AFTER INSERT OR UPDATE ON coord_lock_protocol
  FOR EACH ROW EXECUTE FUNCTION coord_lock_protocol_sync();

-- The function's body from the row as it is now.
UPDATE coord_lock_protocol SET row_locks = row_locks;
