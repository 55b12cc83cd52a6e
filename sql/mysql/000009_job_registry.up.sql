-- Jobs a scheduler has registered (see the PostgreSQL migration).
CREATE TABLE IF NOT EXISTS coord_jobs (
    name       VARBINARY(128) NOT NULL PRIMARY KEY,
    schedule   VARCHAR(255) CHARACTER SET utf8mb4 NOT NULL,
    tz         VARCHAR(64) CHARACTER SET utf8mb4 NOT NULL,
    shards     INT NOT NULL CHECK (shards > 0),
    updated_at DATETIME(6) NOT NULL
) ENGINE = InnoDB;
