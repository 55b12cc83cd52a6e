CREATE TABLE IF NOT EXISTS coord_epochs (
    epoch      bigint      PRIMARY KEY,
    first_seen timestamptz NOT NULL
);
DROP FUNCTION IF EXISTS coord_stale_primary(bigint, bigint);
DROP FUNCTION IF EXISTS coord_epoch_advance(text, bigint);
DROP FUNCTION IF EXISTS coord_system_id();
DROP TABLE IF EXISTS coord_forks;
