-- Leader election and semaphores; see the PostgreSQL file.
CREATE TABLE IF NOT EXISTS coord_election_terms (
    name       VARBINARY(255) NOT NULL,
    term       BIGINT         NOT NULL CHECK (term > 0),
    leader     VARBINARY(255) NOT NULL,
    value      TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    elected_at DATETIME(6)    NOT NULL,
    updated_at DATETIME(6)    NOT NULL,
    PRIMARY KEY (name, term)
) ENGINE=InnoDB;

CREATE TABLE IF NOT EXISTS coord_semaphores (
    name       VARBINARY(255) NOT NULL PRIMARY KEY,
    permits    INT            NOT NULL CHECK (permits BETWEEN 1 AND 1000),
    updated_at DATETIME(6)    NOT NULL
) ENGINE=InnoDB;
