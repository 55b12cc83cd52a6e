DROP TABLE IF EXISTS coord_fences;
DROP TABLE IF EXISTS coord_leases;
