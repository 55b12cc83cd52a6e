-- Idempotency keys: one row per (scope, key), written in the same
-- transaction as the effect it guards.
CREATE TABLE IF NOT EXISTS coord_idempotency (
    scope        VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    idem_key     VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    fingerprint  VARBINARY(64) NOT NULL,
    state        VARCHAR(8) NOT NULL CHECK (state IN ('pending', 'done')),
    response     LONGBLOB,
    locked_until DATETIME(6) NOT NULL,
    created_at   DATETIME(6) NOT NULL,
    updated_at   DATETIME(6) NOT NULL,
    PRIMARY KEY (scope, idem_key),
    KEY coord_idempotency_created (created_at)
) ENGINE = InnoDB;

-- TCC / saga sub-transaction barrier (one row per gid, branch, op).
CREATE TABLE IF NOT EXISTS coord_txn_barrier (
    gid        VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    branch_id  VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    op         VARCHAR(16) NOT NULL,
    reason     VARCHAR(16) NOT NULL,
    created_at DATETIME(6) NOT NULL,
    PRIMARY KEY (gid, branch_id, op),
    KEY coord_txn_barrier_created (created_at)
) ENGINE = InnoDB;

-- Commit markers for verifying a commit whose acknowledgement was lost.
CREATE TABLE IF NOT EXISTS coord_txn_commits (
    id         VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL PRIMARY KEY,
    created_at DATETIME(6) NOT NULL,
    KEY coord_txn_commits_created (created_at)
) ENGINE = InnoDB;
