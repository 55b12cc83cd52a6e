-- Identifying columns compare byte for byte (issue: utf8mb4_bin is a PAD
-- SPACE collation on MariaDB, so 'id-7' and 'id-7 ' were the same key).
-- VARBINARY is NO PAD on MySQL 8 and MariaDB alike. The lengths are the byte
-- limits sqlcoord has always enforced, so every existing row fits, and rows
-- unique under the old collation stay unique (binary equality is stricter).

ALTER TABLE coord_locks
    MODIFY name VARBINARY(255) NOT NULL;

ALTER TABLE coord_leases
    MODIFY name VARBINARY(255) NOT NULL,
    MODIFY owner VARBINARY(255) NOT NULL;

ALTER TABLE coord_fences
    MODIFY resource VARBINARY(255) NOT NULL;

ALTER TABLE coord_idempotency
    MODIFY scope VARBINARY(255) NOT NULL,
    MODIFY idem_key VARBINARY(255) NOT NULL;

ALTER TABLE coord_txn_barrier
    MODIFY gid VARBINARY(128) NOT NULL,
    MODIFY branch_id VARBINARY(128) NOT NULL;

ALTER TABLE coord_txn_commits
    MODIFY id VARBINARY(255) NOT NULL;

ALTER TABLE coord_id_segments
    MODIFY biz_tag VARBINARY(128) NOT NULL;

ALTER TABLE coord_id_workers
    MODIFY owner VARBINARY(255) NOT NULL;

ALTER TABLE coord_job_runs
    MODIFY job VARBINARY(128) NOT NULL,
    MODIFY owner VARBINARY(255) NOT NULL;

ALTER TABLE coord_outbox
    MODIFY topic VARBINARY(255) NOT NULL,
    MODIFY msg_key VARBINARY(255) NULL;

ALTER TABLE coord_inbox
    MODIFY consumer VARBINARY(128) NOT NULL,
    MODIFY message_id VARBINARY(255) NOT NULL;
