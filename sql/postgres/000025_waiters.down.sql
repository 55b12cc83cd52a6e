DROP TABLE IF EXISTS coord_observers;
DROP TABLE IF EXISTS coord_tickets;
DROP TABLE IF EXISTS coord_waiters;
