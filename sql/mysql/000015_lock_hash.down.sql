DROP INDEX coord_locks_created ON coord_locks;
