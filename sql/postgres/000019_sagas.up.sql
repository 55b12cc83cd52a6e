-- Global transactions: sagas and TCC driven by package saga.
-- coord_gtx is written in the caller's business transaction (Begin), so a
-- global transaction exists because that transaction committed. A driver
-- claims a due row (FOR UPDATE SKIP LOCKED), sets claim to a token of its
-- own and due_at to now + its lease, and every later change it makes is
-- fenced by "WHERE gid = … AND claim = <its token>": a driver that was
-- frozen past its lease and taken over changes nothing. step is the branch
-- being run (forward: next action/try or confirm; compensating: the next
-- branch to undo, counting down). stuck: a person must look (a
-- compensation or confirm that failed for good or too often); retry
-- clears it, resolve ends the transaction as 'resolved'.
CREATE TABLE IF NOT EXISTS coord_gtx (
    gid        varchar(128) PRIMARY KEY,
    mode       varchar(8)   NOT NULL CHECK (mode IN ('saga', 'tcc')),
    status     varchar(16)  NOT NULL CHECK (status IN ('running', 'confirming', 'compensating', 'succeeded', 'aborted', 'resolved')),
    stuck      boolean      NOT NULL DEFAULT false,
    step       integer      NOT NULL DEFAULT 0,
    branches   integer      NOT NULL CHECK (branches > 0),
    attempt    bigint       NOT NULL DEFAULT 0,
    claim      varchar(36),
    owner      varchar(255),
    due_at     timestamptz  NOT NULL DEFAULT clock_timestamp(),
    deadline   timestamptz  NOT NULL,
    tries      integer      NOT NULL DEFAULT 0,
    reason     text,
    last_error text,
    created_at timestamptz  NOT NULL DEFAULT clock_timestamp(),
    updated_at timestamptz  NOT NULL DEFAULT clock_timestamp()
);
-- The drivers' scan: only transactions still to drive, oldest due first.
CREATE INDEX IF NOT EXISTS coord_gtx_due ON coord_gtx (due_at)
    WHERE status IN ('running', 'confirming', 'compensating') AND NOT stuck;
-- Listing and cleanup by state and age.
CREATE INDEX IF NOT EXISTS coord_gtx_status ON coord_gtx (status, updated_at);

-- Branches in order. target: a Go function registered by name or an
-- http(s) URL (never with credentials: Begin refuses them).
CREATE TABLE IF NOT EXISTS coord_gtx_branches (
    gid        varchar(128) NOT NULL REFERENCES coord_gtx (gid) ON DELETE CASCADE,
    idx        integer      NOT NULL CHECK (idx >= 0),
    branch     varchar(128) NOT NULL,
    target     varchar(2048) NOT NULL,
    payload    bytea        NOT NULL,
    status     varchar(12)  NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'done', 'failed', 'confirmed', 'undone')),
    tries      integer      NOT NULL DEFAULT 0,
    last_error text,
    updated_at timestamptz  NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (gid, idx),
    UNIQUE (gid, branch)
);
