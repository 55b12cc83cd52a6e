-- A restore from a disk snapshot starts a new epoch (the design
-- is PostgreSQL's migration 20). A data directory restored from a
-- snapshot, a copy or mariabackup keeps @@server_id and the rows of
-- coord_forks, and from the inside it cannot be told from a restart: both
-- are a new run of mariadbd. coord_run is a MEMORY table — its rows never
-- reach the disk, so it is empty whenever the server starts — holding the
-- id of the current run, which the first counter statement of a run
-- records; a history is recorded for one run (coord_forks.run), and the
-- first counter statement of a new run starts a new epoch above every
-- recorded one and the clock's. The fencing statements refuse a token at
-- or below the current epoch's base.
CREATE TABLE IF NOT EXISTS coord_run (
    k  TINYINT  NOT NULL PRIMARY KEY,
    id CHAR(36) NOT NULL
) ENGINE = MEMORY;
ALTER TABLE coord_forks ADD COLUMN IF NOT EXISTS run CHAR(36) NULL;
-- The history this server writes on now, if it is the newest: confirmed
-- for this run, so upgrading the schema starts no epoch.
INSERT IGNORE INTO coord_run (k, id) VALUES (1, UUID());
UPDATE coord_forks f
  JOIN (SELECT MAX(base) AS m FROM coord_forks) t ON f.base = t.m
  JOIN coord_run r ON r.k = 1
SET f.run = r.id WHERE f.server_id = @@server_id;
