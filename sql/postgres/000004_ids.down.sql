DROP TABLE IF EXISTS coord_id_workers;
DROP TABLE IF EXISTS coord_id_segments;
