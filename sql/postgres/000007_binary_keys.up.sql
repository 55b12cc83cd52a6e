-- PostgreSQL compares text byte for byte under its deterministic
-- collations already ('id-7' <> 'id-7 '), and refuses invalid UTF-8 and NUL;
-- sqlcoord validates those up front. Nothing to change: this version keeps
-- the two dialects' migration numbers aligned (MySQL/MariaDB: VARBINARY keys).
SELECT 1;
