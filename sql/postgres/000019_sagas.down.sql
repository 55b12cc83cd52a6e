DROP TABLE IF EXISTS coord_gtx_branches;
DROP TABLE IF EXISTS coord_gtx;
