DROP TABLE IF EXISTS coord_locks;
