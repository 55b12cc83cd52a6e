DROP TABLE IF EXISTS coord_txn_commits;
DROP TABLE IF EXISTS coord_txn_barrier;
DROP TABLE IF EXISTS coord_idempotency;
