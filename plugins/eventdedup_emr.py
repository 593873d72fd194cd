"""The dedup Spark job on AWS EMR Serverless: the amazon provider's EmrServerlessStartJobOperator
running the packaged job (`make package` uploads it under EVENTDEDUP_EMR_JOB_ROOT), chosen instead
of spark-submit by EVENTDEDUP_SPARK_DEPLOY=emr-serverless.

    EVENTDEDUP_EMR_APPLICATION_ID      the EMR Serverless application (type SPARK)
    EVENTDEDUP_EMR_EXECUTION_ROLE_ARN  the job's runtime role: the job's only credentials
    EVENTDEDUP_EMR_JOB_ROOT            s3:// prefix holding dedup_batch.py, eventdedup-job-env.tar.gz
                                       (venv-pack) and eventdedup.toml, or with a folder of streams
                                       streams/<stream>.toml for each (package --upload --streams-dir)
    EVENTDEDUP_EMR_LOG_URI             optional s3:// prefix for the driver's and executors' logs
    EVENTDEDUP_AWS_CONN_ID             the Airflow connection that calls the EMR Serverless API

Only names are read at DAG-parse time (environment variables); the connection is opened when the
task runs. No credential is handed to the job: it runs with the execution role (the default
credential chain inside EMR Serverless), unlike spark-submit, which gets the connection's keys.

What is tested here (tests/dags/test_emr_serverless.py, against moto's EMR Serverless backend):
the API calls the operator makes -- the application started when it is stopped, StartJobRun with
exactly this job driver, execution role, name, timeout and log location, the templated batch id
rendered from XCom, no credential in the request -- and the wait for the run's end state.
What cannot be tested here: a real run. moto stores the request and reports SUCCESS at once; it
runs no Spark, downloads nothing from S3 and checks neither the role's permissions nor whether
the archive's interpreter runs on the release's image. That the archive's venv works (built on
Amazon Linux with the release's Python, with eventdedup and the Spark version the release
ships) and that the config reaches the driver as ./eventdedup.toml need one run on AWS.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow.providers.amazon.aws.operators.emr import EmrServerlessStartJobOperator

DEPLOY_MODES = ("spark-submit", "emr-serverless")

# What `make package` uploads under EVENTDEDUP_EMR_JOB_ROOT.
JOB_SCRIPT = "dedup_batch.py"
JOB_ENV_ARCHIVE = "eventdedup-job-env.tar.gz"
JOB_CONFIG = "eventdedup.toml"
# A stream's configuration under the job root: the job finds it as ./eventdedup.toml all the same.
STREAM_CONFIG_FOLDER = "streams"
# The venv's directory in the driver's and executors' working directory (the archive's #alias).
ENV_ALIAS = "environment"

# Poll every 30 s for up to 2 hours (the job reports in minutes; a 60 s default poll adds up to a
# minute to every batch). The run's own timeout is the same 2 hours, so a run outlives the
# task by nothing even when the worker waiting for it dies (EMR's default timeout is 12 hours).
WAITER_DELAY_SECONDS = 30
WAITER_MAX_ATTEMPTS = 240
EXECUTION_TIMEOUT_MINUTES = WAITER_DELAY_SECONDS * WAITER_MAX_ATTEMPTS // 60


def deploy_mode() -> str:
    """How the dedup job is submitted: `spark-submit` (SparkSubmitOperator, the default) or
    `emr-serverless` (this module). Anything else is refused, so a typo fails the DAG's import
    instead of silently running the job somewhere else."""
    mode = os.environ.get("EVENTDEDUP_SPARK_DEPLOY", "spark-submit")
    if mode not in DEPLOY_MODES:
        raise ValueError(f"EVENTDEDUP_SPARK_DEPLOY={mode!r} is not a deploy mode; expected one of: "
                         + ", ".join(DEPLOY_MODES))
    return mode


def emr_serverless_dedup_operator(task_id: str, batch_id: str,
                                  stream: str | None = None) -> EmrServerlessStartJobOperator:
    """The dedup job of `batch_id` as an EMR Serverless job run, with the stream's configuration
    (`streams/<stream>.toml` under the job root; without a stream, `eventdedup.toml`). `batch_id` may
    be a template ("{{ ti.xcom_pull(task_ids='stage_batch') }}"): it only goes into `job_driver` and
    `name`, both template fields of the operator, so it is rendered when the task runs."""
    # Imported here, not at module level: plugins/ is imported by every DAG parse, and only the
    # emr-serverless deploy mode needs the provider's operator (and boto3 behind it).
    from airflow.providers.amazon.aws.operators.emr import EmrServerlessStartJobOperator

    root = _s3_prefix("EVENTDEDUP_EMR_JOB_ROOT", _required("EVENTDEDUP_EMR_JOB_ROOT"))
    log_uri = os.environ.get("EVENTDEDUP_EMR_LOG_URI")
    overrides: dict[str, Any] | None = None
    if log_uri:
        overrides = {"monitoringConfiguration": {"s3MonitoringConfiguration": {
            "logUri": _s3_prefix("EVENTDEDUP_EMR_LOG_URI", log_uri) + "/"}}}
    return EmrServerlessStartJobOperator(
        task_id=task_id,
        application_id=_required("EVENTDEDUP_EMR_APPLICATION_ID"),
        execution_role_arn=_required("EVENTDEDUP_EMR_EXECUTION_ROLE_ARN"),
        job_driver=job_driver(root, batch_id, JOB_CONFIG if stream is None
                              else f"{STREAM_CONFIG_FOLDER}/{stream}.toml"),
        configuration_overrides=overrides,
        name=f"eventdedup-{batch_id}" if stream is None else f"eventdedup-{stream}-{batch_id}",
        config={"executionTimeoutMinutes": EXECUTION_TIMEOUT_MINUTES},
        # The task ends with the run, as with spark-submit: promotion must not start before the
        # job's output is complete. Whether the wait holds a worker slot or is deferred to the
        # triggerer follows Airflow's [operators] default_deferrable.
        wait_for_completion=True,
        waiter_delay=WAITER_DELAY_SECONDS,
        waiter_max_attempts=WAITER_MAX_ATTEMPTS,
        # Same rule as eventdedup_airflow.aws_conn_id(): one connection for S3 and EMR.
        aws_conn_id=os.environ.get("EVENTDEDUP_AWS_CONN_ID", "aws_default"),
    )


def job_driver(root: str, batch_id: str, config_key: str = JOB_CONFIG) -> dict[str, Any]:
    """StartJobRun's jobDriver for the job packaged under `root` (an s3:// prefix, no trailing /),
    with the configuration at `config_key` under it."""
    archives = ",".join([
        # The venv-pack archive, unpacked as ./environment in the driver's and every executor's
        # working directory; the three --conf below make the driver and the Python workers run its
        # interpreter. This is AWS's documented recipe for a venv on EMR Serverless.
        f"{root}/{JOB_ENV_ARCHIVE}#{ENV_ALIAS}",
        # The configuration, shipped as an "archive" too, on purpose: Spark places archives in the
        # driver's working directory in cluster mode since 3.1.1 (SPARK-33748, the mechanism that
        # makes ./environment work above), but --files only since 3.4 (SPARK-33782), and EMR
        # Serverless documents no placement for --files. A file that is no archive is copied to
        # the alias as it is (Spark's Utils.unpack, Hadoop's FSDownload), so the driver finds
        # ./eventdedup.toml wherever it finds ./environment. The job reads it with open(), so an
        # s3:// path would not do. spark-submit keeps only the last --archives: one list for both.
        f"{root}/{config_key}#{JOB_CONFIG}",
    ])
    python = f"./{ENV_ALIAS}/bin/python"
    parameters = [
        "--archives", archives,
        "--conf", f"spark.emr-serverless.driverEnv.PYSPARK_DRIVER_PYTHON={python}",
        "--conf", f"spark.emr-serverless.driverEnv.PYSPARK_PYTHON={python}",
        "--conf", f"spark.executorEnv.PYSPARK_PYTHON={python}",
    ]
    return {"sparkSubmit": {
        "entryPoint": f"{root}/{JOB_SCRIPT}",
        "entryPointArguments": ["--config", JOB_CONFIG, "--batch-id", batch_id],
        # EMR Serverless splits these on whitespace (no shell quoting): _s3_prefix refuses
        # whitespace, and the commas and # that would break the archive list.
        "sparkSubmitParameters": " ".join(parameters),
    }}


def _required(name: str) -> str:
    value = os.environ.get(name, "").strip()
    if not value:
        raise ValueError(f"{name} is not set; EVENTDEDUP_SPARK_DEPLOY=emr-serverless needs it")
    return value


def _s3_prefix(name: str, value: str) -> str:
    prefix = value.strip().rstrip("/")
    if not prefix.startswith("s3://") or len(prefix) <= len("s3://"):
        raise ValueError(f"{name}={value!r} is not an s3:// prefix")
    if any(c.isspace() or c in ",#" for c in prefix):
        raise ValueError(f"{name}={value!r}: whitespace, ',' and '#' cannot be passed in spark-submit's --archives")
    return prefix
