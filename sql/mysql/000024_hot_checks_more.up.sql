-- PostgreSQL only (see its migration 24): MySQL/MariaDB tables keep their
-- CHECK constraints, which they do not rebuild on every write.
SELECT 1;
