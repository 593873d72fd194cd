# Airflow 3 image with eventdedup, Java 17 for the Spark driver and standalone Spark, pyspark's
# spark-class, and the stack's launcher (eventdedup_dev.stack), which every compose service runs.
FROM apache/airflow:3.3.2-python3.11
USER root
RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /opt/eventdedup /var/lib/eventdedup-stack \
 && chown airflow:root /opt/eventdedup /var/lib/eventdedup-stack
ENV JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64
USER airflow
COPY --chown=airflow:root requirements.lock /opt/eventdedup/requirements.lock
# The image's own Airflow stays; the lock pins everything else the project runs with. uv builds the
# job archive's environment (python -m eventdedup_dev.package).
RUN grep -v -E '^(apache-airflow|apache-airflow-core|apache-airflow-task-sdk)==' /opt/eventdedup/requirements.lock \
      > /tmp/requirements.txt \
 && pip install --no-cache-dir -r /tmp/requirements.txt uv==0.13.9
COPY --chown=airflow:root pyproject.toml /opt/eventdedup/pyproject.toml
COPY --chown=airflow:root include /opt/eventdedup/include
COPY --chown=airflow:root packaging /opt/eventdedup/packaging
COPY --chown=airflow:root spark_jobs /opt/eventdedup/spark_jobs
COPY --chown=airflow:root devtools /opt/eventdedup/devtools
# Editable: the launcher finds dags/, plugins/, conf/ and dist/ beside it, under /opt/eventdedup.
RUN pip install --no-cache-dir --no-deps -e /opt/eventdedup -e /opt/eventdedup/devtools
WORKDIR /opt/eventdedup
