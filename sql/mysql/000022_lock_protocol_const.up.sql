-- PostgreSQL only (the lock protocol folded into the lock statement); on
-- MySQL/MariaDB a lock is the name's row lock, with no protocol to read.
SELECT 1;
