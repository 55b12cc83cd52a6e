-- MySQL/MariaDB keep row locks: InnoDB holds them in memory (no redo for a
-- lock-only transaction), already as fast as GET_LOCK. Nothing to change:
-- this version keeps the two dialects' migration numbers aligned.
SELECT 1;
