-- PostgreSQL only.
SELECT 1;
