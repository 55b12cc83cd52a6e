DROP TABLE IF EXISTS coord_forks;
