-- PostgreSQL only: it rebuilds a table's CHECK expressions on every write.
-- MySQL/MariaDB tables keep theirs.
SELECT 1;
