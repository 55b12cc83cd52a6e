-- Waiting that holds nothing open on the server: see the PostgreSQL file.
-- coord_waiters.conn_id is the CONNECTION_ID() of the connection the
-- Client sleeps on (SELECT SLEEP), which a release interrupts with KILL
-- QUERY to wake it.
CREATE TABLE IF NOT EXISTS coord_waiters (
    id         BIGINT      NOT NULL AUTO_INCREMENT PRIMARY KEY,
    label      VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    conn_id    BIGINT      NOT NULL DEFAULT 0,
    expires_at DATETIME(6) NOT NULL,
    created_at DATETIME(6) NOT NULL,
    renewed_at DATETIME(6) NOT NULL,
    KEY coord_waiters_expires (expires_at)
) ENGINE = InnoDB;

CREATE TABLE IF NOT EXISTS coord_tickets (
    seq        BIGINT      NOT NULL AUTO_INCREMENT PRIMARY KEY,
    queue      VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    waiter     BIGINT      NOT NULL,
    owner      VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    created_at DATETIME(6) NOT NULL,
    KEY coord_tickets_queue (queue, seq),
    KEY coord_tickets_waiter (waiter)
) ENGINE = InnoDB;

CREATE TABLE IF NOT EXISTS coord_observers (
    queue      VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    waiter     BIGINT      NOT NULL,
    created_at DATETIME(6) NOT NULL,
    PRIMARY KEY (queue, waiter),
    KEY coord_observers_waiter (waiter)
) ENGINE = InnoDB;

-- A lease's revocation gate (coord.Client.FenceLease): tokens of lease
-- name below revoked_below were released or revoked. FenceLease holds a
-- shared lock on the row for the rest of its transaction and a release
-- or revocation raises it with an exclusive one, so a release returns only
-- after the fenced transactions admitted before it ended, and none is
-- admitted after it. Renewals and acquisitions never touch it (InnoDB has
-- no lock that would let them pass a shared lock on the lease's own row).
CREATE TABLE IF NOT EXISTS coord_lease_gates (
    name          VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL PRIMARY KEY,
    revoked_below BIGINT      NOT NULL,
    updated_at    DATETIME(6) NOT NULL
) ENGINE = InnoDB;
