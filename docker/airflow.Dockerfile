# Airflow 3 image with eventdedup, Java 17 for the Spark driver, and pyspark's spark-submit.
FROM apache/airflow:3.3.2-python3.11
USER root
RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
 && rm -rf /var/lib/apt/lists/*
ENV JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64
USER airflow
COPY --chown=airflow:root requirements.lock /opt/eventdedup/requirements.lock
# The image's own Airflow stays; the lock pins everything else the project runs with.
RUN grep -v -E '^(apache-airflow|apache-airflow-core|apache-airflow-task-sdk)==' /opt/eventdedup/requirements.lock \
      > /tmp/requirements.txt \
 && pip install --no-cache-dir -r /tmp/requirements.txt
COPY --chown=airflow:root pyproject.toml /opt/eventdedup/pyproject.toml
COPY --chown=airflow:root include /opt/eventdedup/include
RUN pip install --no-cache-dir --no-deps /opt/eventdedup
