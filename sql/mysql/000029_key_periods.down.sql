-- Not reversible while the keys are partitioned by period (their primary
-- key holds period): partitions.EnableKeys has no way back.
DROP TABLE IF EXISTS coord_periods;
ALTER TABLE coord_idempotency DROP COLUMN period;
