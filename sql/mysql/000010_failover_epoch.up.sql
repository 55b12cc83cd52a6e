-- No failover epoch on MySQL/MariaDB (see README "What survives which
-- failover"); the version keeps both dialects' schemas numbered alike.
SELECT 1;
