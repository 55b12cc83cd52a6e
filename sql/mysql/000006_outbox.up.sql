-- Transactional outbox (see the PostgreSQL migration). Times are UTC.
CREATE TABLE IF NOT EXISTS coord_outbox (
    id           BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    topic        VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    msg_key      VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    payload      LONGBLOB NOT NULL,
    headers      TEXT NOT NULL,
    state        VARCHAR(10) NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'published', 'dead')),
    created_at   DATETIME(6) NOT NULL,
    available_at DATETIME(6) NOT NULL,
    attempts     INT NOT NULL DEFAULT 0,
    last_error   TEXT,
    published_at DATETIME(6),
    KEY coord_outbox_due (state, available_at, id),
    KEY coord_outbox_key (msg_key, state, id),
    KEY coord_outbox_published (state, published_at)
) ENGINE = InnoDB;

CREATE TABLE IF NOT EXISTS coord_inbox (
    consumer    VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    message_id  VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    received_at DATETIME(6) NOT NULL,
    PRIMARY KEY (consumer, message_id),
    KEY coord_inbox_received (received_at)
) ENGINE = InnoDB;
