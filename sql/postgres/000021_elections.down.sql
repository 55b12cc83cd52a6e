DROP TABLE IF EXISTS coord_semaphores;
DROP TABLE IF EXISTS coord_election_terms;
