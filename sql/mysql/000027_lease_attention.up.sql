-- What a release must do besides ending its lease, kept on the lease's row
-- so that ending a lease nobody waits for and nobody fenced with FenceLease
-- is one single-table UPDATE (a join or a subquery in that UPDATE costs
-- MariaDB about a third of its lease throughput):
--   bit 1: a waiter may be queued for the lease (set after a ticket of
--          the lease's queue is inserted; cleared by a release that finds
--          no live ticket). Only a hint for waking: who may take a free
--          lease is still decided by the queue itself.
--   bit 2: the lease has a revocation gate (coord_lease_gates), set in
--          the transaction that creates the gate and never cleared; a
--          release of such a lease raises the gate in the statement that
--          ends it.
ALTER TABLE coord_leases ADD COLUMN attention TINYINT UNSIGNED NOT NULL DEFAULT 0;
UPDATE coord_leases l JOIN coord_lease_gates g ON g.name = l.name SET l.attention = l.attention | 2;
UPDATE coord_leases l JOIN (SELECT DISTINCT queue FROM coord_tickets) t ON t.queue = l.name SET l.attention = l.attention | 1;
