-- Idempotency keys: one row per (scope, key), written in the same
-- transaction as the effect it guards.
CREATE TABLE IF NOT EXISTS coord_idempotency (
    scope        text        NOT NULL CHECK (length(scope) BETWEEN 1 AND 255),
    idem_key     text        NOT NULL CHECK (length(idem_key) BETWEEN 1 AND 255),
    fingerprint  bytea       NOT NULL,
    state        text        NOT NULL CHECK (state IN ('pending', 'done')),
    response     bytea,
    locked_until timestamptz NOT NULL,
    created_at   timestamptz NOT NULL,
    updated_at   timestamptz NOT NULL,
    PRIMARY KEY (scope, idem_key)
);
CREATE INDEX IF NOT EXISTS coord_idempotency_created ON coord_idempotency (created_at);

-- TCC / saga sub-transaction barrier (one row per gid, branch, op).
CREATE TABLE IF NOT EXISTS coord_txn_barrier (
    gid        text        NOT NULL CHECK (length(gid) BETWEEN 1 AND 128),
    branch_id  text        NOT NULL CHECK (length(branch_id) BETWEEN 1 AND 128),
    op         text        NOT NULL,
    reason     text        NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (gid, branch_id, op)
);
CREATE INDEX IF NOT EXISTS coord_txn_barrier_created ON coord_txn_barrier (created_at);

-- Commit markers: txn.Do writes one in the transaction when asked to be
-- able to verify a commit whose acknowledgement was lost.
CREATE TABLE IF NOT EXISTS coord_txn_commits (
    id         text        PRIMARY KEY CHECK (length(id) BETWEEN 1 AND 255),
    created_at timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS coord_txn_commits_created ON coord_txn_commits (created_at);
