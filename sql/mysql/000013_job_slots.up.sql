-- See the PostgreSQL file.
CREATE TABLE IF NOT EXISTS coord_job_slots (
    job         VARBINARY(255) NOT NULL,
    fire_time   DATETIME(6)    NOT NULL,
    shard_total INT            NOT NULL,
    created_at  DATETIME(6)    NOT NULL,
    PRIMARY KEY (job, fire_time)
) ENGINE=InnoDB;
