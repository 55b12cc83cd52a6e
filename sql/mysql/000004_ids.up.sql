-- Segment ID allocation (Leaf-style): each fetch advances max_id by step
-- in one transaction, so ranges handed out never overlap.
CREATE TABLE IF NOT EXISTS coord_id_segments (
    biz_tag     VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL PRIMARY KEY,
    max_id      BIGINT NOT NULL CHECK (max_id >= 0),
    step        INT NOT NULL CHECK (step > 0),
    description VARCHAR(255) NOT NULL DEFAULT '',
    updated_at  DATETIME(6) NOT NULL
) ENGINE = InnoDB;

-- Snowflake worker ids leased to live nodes.
CREATE TABLE IF NOT EXISTS coord_id_workers (
    worker_id    INT NOT NULL PRIMARY KEY CHECK (worker_id >= 0),
    owner        VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    expires_at   DATETIME(6) NOT NULL,
    last_ms      BIGINT NOT NULL DEFAULT 0,
    released     BOOLEAN NOT NULL DEFAULT FALSE,
    heartbeat_at DATETIME(6) NOT NULL
) ENGINE = InnoDB;
