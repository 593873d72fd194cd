"""The Spark dedup job: the session, the read stage (parse, group by cache key), the dedup stage
(decide, stage outputs and cache segments) and the driver that runs them and writes the job result."""
