-- Row locks: one row per lock name, locked with SELECT ... FOR UPDATE in the
-- holder's transaction. Rows are created on first use and never deleted.
-- utf8mb4_bin: lock names are compared byte for byte ("A" is not "a").
CREATE TABLE IF NOT EXISTS coord_locks (
    name       VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL PRIMARY KEY,
    created_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6))
) ENGINE = InnoDB;
