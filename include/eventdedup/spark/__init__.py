"""Spark plumbing: starting a SparkContext and its driver JVM, the Java check, the Python workers' daemon,
the JVM's output relay and the shape of a spark-submit for local mode or a cluster. Nothing here
decides anything about events: the job's stages are eventdedup.job."""
