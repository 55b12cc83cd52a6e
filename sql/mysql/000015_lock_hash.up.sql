-- Lock names with a bounded cost: InnoDB locks need the name's
-- row, created by the first lock in the locker's transaction; rows of
-- names no longer in use may be deleted (CleanupLocks, oldest first,
-- skipping rows someone holds). A deleted name is simply created again by
-- its next lock.
CREATE INDEX coord_locks_created ON coord_locks (created_at);
