-- Idempotency keys by period (see the PostgreSQL migration). ADD COLUMN
-- with a constant default is instant on MariaDB 10.3+ and MySQL 8.0.12+.
ALTER TABLE coord_idempotency ADD COLUMN period BIGINT NOT NULL DEFAULT 0;
CREATE TABLE IF NOT EXISTS coord_periods (
    tbl          VARCHAR(63) CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY,
    period_us    BIGINT NOT NULL,
    legacy_until BIGINT NOT NULL,
    CONSTRAINT coord_periods_us CHECK (period_us > 0)
) ENGINE = InnoDB;
