"""The Spark dedup job's stages: the read stage (parse, group by cache key), the dedup stage
(decide each bucket, stage outputs and cache segments) and the driver that runs them and writes
the job result. Starting Spark itself is eventdedup.spark's."""
