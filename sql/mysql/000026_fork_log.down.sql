DROP TABLE IF EXISTS coord_fork_log;
