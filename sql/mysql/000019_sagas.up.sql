-- Global transactions (see the PostgreSQL migration for the design).
-- MySQL has no partial index: the drivers' scan uses (stuck, status,
-- due_at) and reads the three live states as ranges. Identifying columns
-- are VARBINARY (NO PAD: 'g-1' and 'g-1 ' are two transactions).
CREATE TABLE IF NOT EXISTS coord_gtx (
    gid        VARBINARY(128) NOT NULL PRIMARY KEY,
    mode       VARCHAR(8)   NOT NULL CHECK (mode IN ('saga', 'tcc')),
    status     VARCHAR(16)  NOT NULL CHECK (status IN ('running', 'confirming', 'compensating', 'succeeded', 'aborted', 'resolved')),
    stuck      TINYINT(1)   NOT NULL DEFAULT 0,
    step       INT          NOT NULL DEFAULT 0,
    branches   INT          NOT NULL CHECK (branches > 0),
    attempt    BIGINT       NOT NULL DEFAULT 0,
    claim      VARBINARY(36) NULL,
    owner      VARCHAR(255) NULL,
    due_at     DATETIME(6)  NOT NULL,
    deadline   DATETIME(6)  NOT NULL,
    tries      INT          NOT NULL DEFAULT 0,
    reason     TEXT         NULL,
    last_error TEXT         NULL,
    created_at DATETIME(6)  NOT NULL,
    updated_at DATETIME(6)  NOT NULL,
    KEY coord_gtx_due (stuck, status, due_at),
    KEY coord_gtx_status (status, updated_at)
) ENGINE = InnoDB;

CREATE TABLE IF NOT EXISTS coord_gtx_branches (
    gid        VARBINARY(128) NOT NULL,
    idx        INT           NOT NULL CHECK (idx >= 0),
    branch     VARBINARY(128) NOT NULL,
    target     VARCHAR(2048) NOT NULL,
    payload    LONGBLOB      NOT NULL,
    status     VARCHAR(12)   NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'done', 'failed', 'confirmed', 'undone')),
    tries      INT           NOT NULL DEFAULT 0,
    last_error TEXT          NULL,
    updated_at DATETIME(6)   NOT NULL,
    PRIMARY KEY (gid, idx),
    UNIQUE KEY coord_gtx_branch_name (gid, branch),
    CONSTRAINT coord_gtx_branches_gid FOREIGN KEY (gid) REFERENCES coord_gtx (gid) ON DELETE CASCADE
) ENGINE = InnoDB;
