-- MySQL/MariaDB only (coord_leases.attention, see the MySQL file): a
-- PostgreSQL release finds its queue's head and takes the lease's row
-- FOR UPDATE in one statement at no measurable cost. Kept as a migration
-- so that both families share schema numbers.
SELECT 1;
