DROP TABLE IF EXISTS coord_sessions;
