-- Idempotency keys by period. coord_idempotency gets a period column (0
-- for every key of a table that is not partitioned, the default an older
-- release's insert gets), and coord_periods records the tables that
-- partitions.EnableKeys partitioned by period: the period's length and,
-- while the keys written before the switch are still inside their
-- protection window, the last period in which a new key also claims
-- period 0 (where those keys live). Inserts read it in the same
-- statement, so the database, not a client, decides which periods a key
-- claims (docs/retention.md, "Idempotency keys by period").
ALTER TABLE coord_idempotency ADD COLUMN IF NOT EXISTS period bigint NOT NULL DEFAULT 0;
CREATE TABLE IF NOT EXISTS coord_periods (
    tbl          text   PRIMARY KEY CHECK (length(tbl) BETWEEN 1 AND 63),
    period_us    bigint NOT NULL CHECK (period_us > 0),
    legacy_until bigint NOT NULL
);
