"""What Airflow itself loads for eventdedup: S3 access from an Airflow connection, the Spark
submit operator that passes it on, and alerting through the provider notifiers. Everything that
decides something (which batch a run is, whether it may be promoted) is in the library.

Nothing here runs at DAG-parse time: connections and variables are read inside `execute` /
task bodies only, so parsing opens no connection.
"""
from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

from eventdedup.config import Config, load_config

if TYPE_CHECKING:  # imported where used: every DAG file imports this module at each parse
    from eventdedup.ops.alerts import Alert
    from eventdedup.s3store import S3Store

log = logging.getLogger(__name__)

PROJECT_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CONFIG = PROJECT_ROOT / "conf" / "eventdedup.airflow.toml"


def store_pool() -> str:
    """The pool every task that reads or writes the commit protocol's state runs in (pipeline,
    maintenance and operations DAGs). One slot makes them take turns: a backfill runs beside the
    schedule, and a consistency check that met another run's promotion half-way would see its
    journal and halt the pipeline. The pool must exist (`airflow pools set eventdedup_store 1 ...`;
    make stack creates it): Airflow never schedules a task of a missing pool. The default,
    `default_pool`, serialises nothing. With a folder of streams, each stream has a pool of its own
    named after this one (eventdedup.streams.store_pool_name)."""
    return os.environ.get("EVENTDEDUP_STORE_POOL", "default_pool")


def aws_conn_id() -> str:
    return os.environ.get("EVENTDEDUP_AWS_CONN_ID", "aws_default")


def config_path() -> str:
    return os.environ.get("EVENTDEDUP_CONFIG", str(DEFAULT_CONFIG))


@dataclass(frozen=True)
class StreamTarget:
    """The configuration a task works on: a stream's file (`name`, `config_file`), or, in the
    one-stream deployment (both None), the file EVENTDEDUP_CONFIG names when the task runs."""

    name: str | None = None
    config_file: str | None = None

    def config_path(self) -> str:
        return self.config_file or config_path()

    def subject(self, text: str) -> str:
        """An alert's subject, naming the stream when there are several."""
        return text if self.name is None else f"[{self.name}] {text}"


ONE_STREAM = StreamTarget()


def load_pipeline_config(target: StreamTarget = ONE_STREAM) -> Config:
    """The stream's TOML configuration, with the S3 endpoint taken from the Airflow connection's
    extra `endpoint_url` when it has one: endpoints and credentials live in the connection, not in code."""
    endpoint = _connection_endpoint()
    environ = dict(os.environ)
    if endpoint:
        environ["EVENTDEDUP_S3__ENDPOINT_URL"] = f'"{endpoint}"'
    return load_config(target.config_path(), environ)


def s3_store(config: Config) -> S3Store:
    """A client from the Airflow connection, with the library's own client settings (retries,
    a pool for the promotion's 16 copy threads, path-style addressing for a custom endpoint)."""
    from airflow.providers.amazon.aws.hooks.s3 import S3Hook

    from eventdedup.s3store import S3Store, boto_config

    return S3Store(S3Hook(aws_conn_id=aws_conn_id(), config=boto_config(config.s3)).get_conn(), config.s3.bucket)


def _connection_endpoint() -> str | None:
    from airflow.providers.amazon.aws.hooks.base_aws import AwsBaseHook

    hook = AwsBaseHook(aws_conn_id=aws_conn_id(), client_type="s3")
    return hook.conn_config.endpoint_url


# What the S3 connection's credentials are called in a process environment: secrets all three.
SECRET_ENV_VARS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")


class EventDedupSparkSubmitOperator(SparkSubmitOperator):
    """spark-submit of spark_jobs/dedup_batch.py, shaped for the Spark connection's master when
    the task runs (eventdedup.spark.deployment): local mode on loopback with this interpreter, or a
    cluster with the packaged job environment (EVENTDEDUP_SPARK_JOB_ARCHIVE, `make package`) and
    the driver at EVENTDEDUP_SPARK_DRIVER_HOST.

    The S3 connection's credentials reach the driver through spark-submit's environment, never
    its command line. Executors on a cluster use their host's credentials. On YARN and Kubernetes
    masters the provider's hook turns every env var into `--conf spark.yarn.appMasterEnv.K=V` /
    `spark.kubernetes.driverEnv.K=V` on spark-submit's command line, readable by any user of the
    host (`ps`, /proc) and logged: there, the secrets are withheld and the job uses the cluster's
    own credential chain (instance role, IRSA)."""

    def __init__(self, *, batch_id: str, target: StreamTarget = ONE_STREAM, **kwargs: Any) -> None:
        kwargs.setdefault("application", str(PROJECT_ROOT / "spark_jobs" / "dedup_batch.py"))
        kwargs.setdefault("name", "eventdedup-dedup-batch" if target.name is None
                          else f"eventdedup-{target.name}-dedup-batch")
        kwargs.setdefault("conn_id", os.environ.get("EVENTDEDUP_SPARK_CONN_ID", "spark_default"))
        conf = {"spark.ui.enabled": "false", **kwargs.pop("conf", {})}
        super().__init__(conf=conf, application_args=["--batch-id", batch_id], **kwargs)
        # the stream's file; None: what EVENTDEDUP_CONFIG names when the task runs
        self.stream_config_file = target.config_file

    def execute(self, context: Any) -> None:
        self.prepare_submit()
        super().execute(context)

    def prepare_submit(self) -> None:
        """The job's deployment, environment and arguments, resolved when the task runs."""
        from airflow.providers.amazon.aws.hooks.base_aws import AwsBaseHook
        from airflow.sdk.log import mask_secret

        from eventdedup.spark.deployment import submit_shape

        master = self._get_hook()._connection["master"]
        shape = submit_shape(master, sys.executable, os.environ.get("EVENTDEDUP_SPARK_JOB_ARCHIVE") or None,
                             os.environ.get("EVENTDEDUP_SPARK_DRIVER_HOST") or None,
                             # what spark-submit will run with, but for ours: the user's settings come first
                             environ={**os.environ, **(self.env_vars or {})}, properties_file=self.properties_file)
        self.conf = {**shape.conf, **(self.conf or {})}
        self._archives = shape.archives or self._archives
        hook = AwsBaseHook(aws_conn_id=aws_conn_id(), client_type="s3")
        credentials = hook.get_credentials()
        for secret in (credentials.secret_key, credentials.token):
            if secret:
                mask_secret(secret)  # redacted from every task log line, whatever prints it
        env = {**shape.env, "AWS_ACCESS_KEY_ID": credentials.access_key,
               "AWS_SECRET_ACCESS_KEY": credentials.secret_key,
               # spark-submit of the pyspark in this environment comes first on the PATH
               "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
        if credentials.token:
            env["AWS_SESSION_TOKEN"] = credentials.token
        if hook.conn_config.endpoint_url:
            env["EVENTDEDUP_S3__ENDPOINT_URL"] = f'"{hook.conn_config.endpoint_url}"'
        if os.environ.get("JAVA_HOME"):
            env["JAVA_HOME"] = os.environ["JAVA_HOME"]
        self.env_vars = {**(self.env_vars or {}), **env}
        self.application_args = ["--config", self.stream_config_file or config_path(), *(self.application_args or [])]

    def _get_hook(self) -> Any:
        spark = super()._get_hook()
        if spark._is_yarn or spark._is_kubernetes:  # the hook would put env_vars on the command line
            withheld = [name for name in SECRET_ENV_VARS if name in (spark._env_vars or {})]
            spark._env_vars = {k: v for k, v in (spark._env_vars or {}).items() if k not in SECRET_ENV_VARS}
            if withheld:
                log.warning("eventdedup: master %s takes env vars on the command line; %s withheld, the job uses "
                            "the cluster's credential chain", spark._connection["master"], ", ".join(withheld))
        return spark


def send_alert(alert: Alert, context: Any = None, target: StreamTarget = ONE_STREAM) -> None:
    """Everywhere configured: always the alert object on the stream's S3 prefix and a structured log
    line; SNS (SnsNotifier) when EVENTDEDUP_ALERT_SNS_TOPIC_ARN is set; e-mail (SmtpNotifier,
    connection smtp_default) when EVENTDEDUP_ALERT_EMAIL is set, their subject naming the stream."""
    from eventdedup.ops.alerts import record_alert

    config = load_pipeline_config(target)
    record_alert(s3_store(config), config, alert)
    subject = target.subject(alert.subject)
    topic = os.environ.get("EVENTDEDUP_ALERT_SNS_TOPIC_ARN")
    if topic:
        from airflow.providers.amazon.aws.notifications.sns import SnsNotifier

        SnsNotifier(aws_conn_id=aws_conn_id(), target_arn=topic, subject=subject[:100],
                    message=alert.message).notify(context or {})
    email = os.environ.get("EVENTDEDUP_ALERT_EMAIL")
    if email:
        from airflow.providers.smtp.notifications.smtp import SmtpNotifier

        SmtpNotifier(to=email, subject=subject, html_content=f"<pre>{alert.message}</pre>").notify(context or {})


@contextmanager
def alert_and_raise(batch_id: str, kind: str, context: Any, final_try_only: bool = False, *,
                    target: StreamTarget = ONE_STREAM) -> Iterator[None]:
    """Alert from inside the task: callbacks do not fire when someone changes task state in the UI.
    Once per run and kind: a halted run re-checks on every retry, and an operator should hear of
    the halt once, not once a minute (the alert object already there says it was sent). With
    `final_try_only`, only the try after which the task fails for good alerts (a wait that may
    well end by itself, like a predecessor still committing)."""
    try:
        yield
    except Exception as exc:
        run_id = str(context.get("run_id", "")) if context is not None else ""
        ti = context.get("ti") if context is not None else None
        if final_try_only and ti is not None and int(ti.try_number) <= int(ti.max_tries):
            raise
        try:
            from eventdedup.ops.alerts import Alert

            if _already_alerted(batch_id, kind, run_id, target):
                log.warning("eventdedup: %s for batch %s persists (run %s); alerted already", kind, batch_id, run_id)
            else:
                send_alert(Alert.now(batch_id, kind, f"{type(exc).__name__}: {exc}", run_id), context, target)
        except Exception:  # the alert must never hide the failure it reports
            log.exception("eventdedup: could not send the %s alert for batch %s", kind, batch_id)
        raise


@contextmanager
def store_operation(label: str, alert_kind: str, context: Any,
                    target: StreamTarget = ONE_STREAM) -> Iterator[tuple[Config, S3Store]]:
    """An operation on the stream's store from an operations DAG's task (retract, reshard): the
    configuration and a store, the consistency gate passed first, and any failure alerted as
    `alert_kind` under `label`, then raised."""
    from eventdedup.ops.scheduling import consistency_gate

    config = load_pipeline_config(target)
    store = s3_store(config)
    with alert_and_raise(label, alert_kind, context, target=target):
        consistency_gate(store, config)
        yield config, store


def _already_alerted(batch_id: str, kind: str, run_id: str, target: StreamTarget) -> bool:
    """Whether this run already sent this alert (its object is there). Unreadable: not sent."""
    from eventdedup.ops.alerts import read_alert

    try:
        config = load_pipeline_config(target)
        previous = read_alert(s3_store(config), config, batch_id)
    except Exception:  # better a second alert than none
        log.warning("eventdedup: could not read batch %s's alert object; alerting", batch_id, exc_info=True)
        return False
    return previous is not None and previous.kind == kind and previous.run_id == run_id and bool(run_id)


def send_batch_metrics(store: S3Store, config: Config, batch_id: str, stream: str | None = None) -> None:
    """A committed batch's metrics (eventdedup.ops.status.batch_metrics) through Airflow's own
    metrics configuration ([metrics] statsd_on or otel_on): what Airflow's dashboards already
    collect, a stream's named `eventdedup.<stream>.<metric>`. Best effort: the batch is committed and
    its output Asset due whatever a metric does, so a failure is logged, not raised. Counters are
    sent again if the task is retried."""
    try:
        from airflow.sdk.observability.stats import Stats
    except ImportError:  # Airflow 3.1 and 3.2 kept it here
        from airflow.stats import Stats  # type: ignore[no-redef]

    from eventdedup.ops.status import batch_metrics

    try:
        metrics = batch_metrics(store, config, batch_id, stream)
        for name, value in metrics["counters"].items():
            if value:
                Stats.incr(name, count=int(value))
        for name, value in metrics["gauges"].items():
            Stats.gauge(name, value)
    except Exception:  # noqa: BLE001 - metrics never fail a committed batch's task
        log.warning("batch %s: its metrics were not sent", batch_id, exc_info=True)
