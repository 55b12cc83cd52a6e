DROP TABLE IF EXISTS coord_job_slots;
