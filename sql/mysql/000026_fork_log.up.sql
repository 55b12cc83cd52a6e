-- Every history a database has had, in order: see the PostgreSQL file.
-- MySQL/MariaDB have no stored function here (creating one needs SUPER
-- where binary logging is on): the client that starts an epoch appends it
-- in the same connection, right after recording it in coord_forks.
CREATE TABLE IF NOT EXISTS coord_fork_log (
    base       BIGINT      NOT NULL PRIMARY KEY,
    history    VARCHAR(64) NOT NULL,
    first_seen DATETIME(6) NOT NULL,
    reason     TEXT        NOT NULL
) ENGINE = InnoDB;
INSERT IGNORE INTO coord_fork_log (base, history, first_seen, reason)
SELECT base, CAST(server_id AS CHAR), first_seen, reason FROM coord_forks;
