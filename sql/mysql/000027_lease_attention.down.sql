ALTER TABLE coord_leases DROP COLUMN attention;
