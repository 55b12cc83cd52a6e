DROP TABLE IF EXISTS coord_members;
