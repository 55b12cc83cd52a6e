-- Leader election and semaphores (coord.Election, coord.Semaphore).
--
-- An election's leadership is a lease in coord_leases named
-- 'election:<name>'; its fencing token is the term. Each term a leader
-- won is one row here, written while its lease is live (and only then),
-- so observers read every term in order and followers read the leader's
-- proclaimed value. Old terms are pruned by later leaders.
CREATE TABLE IF NOT EXISTS coord_election_terms (
    name       text        NOT NULL CHECK (length(name) BETWEEN 1 AND 255),
    term       bigint      NOT NULL CHECK (term > 0),
    leader     text        NOT NULL,
    value      text        NOT NULL,
    elected_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    PRIMARY KEY (name, term)
);

-- A semaphore's permit count. Its permits are leases in coord_leases
-- named 'semaphore:<name>#NNNN', one per slot below the count.
CREATE TABLE IF NOT EXISTS coord_semaphores (
    name       text        PRIMARY KEY CHECK (length(name) BETWEEN 1 AND 255),
    permits    integer     NOT NULL CHECK (permits BETWEEN 1 AND 1000),
    updated_at timestamptz NOT NULL
);
