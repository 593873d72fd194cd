"""`make stack`: the production topology as local processes, no Docker.

    python -m eventdedup_dev.stack up        # start everything, wait until healthy, print the URLs
    python -m eventdedup_dev.stack down      # stop exactly what `up` started
    python -m eventdedup_dev.stack status    # what runs, what answers
    python -m eventdedup_dev.stack run NAME  # exec one service in the foreground (compose does this)

Services (docker-compose.yaml runs each of them with `run NAME`, so the two cannot drift):
- postgres: PostgreSQL, Airflow's metadata database (Debian's package; data in .stack/postgres)
- s3: the embedded S3 store (SeaweedFS), data in .stack/s3
- airflow-api-server, airflow-scheduler (LocalExecutor), airflow-dag-processor, airflow-triggerer
- spark-master and spark-worker-1, spark-worker-2 (standalone, one core each)

Every service listens on EVENTDEDUP_STACK_BIND (127.0.0.1). Ports and the state directory come
from the environment (`StackSettings.from_env`), as do the pipeline's own EVENTDEDUP_* settings,
which pass through to Airflow. Secrets (database password, JWT secret, S3 credentials) live in
.stack/secrets.json (mode 0600) and reach processes through their environment only: never a
command line, which every user of the host can read.

The Spark workers run with a deliberately bare environment (system PATH, no PYTHONPATH): they
cannot import eventdedup, so a job that works here works on a cluster whose hosts have nothing
preinstalled. Their environment does hold the S3 credentials, as a cluster host's instance role
would: executors never receive credentials from the job.
"""
from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[2]
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
WORKERS = ("spark-worker-1", "spark-worker-2")
STORE_POOL = "eventdedup_store"  # one slot, and one per stream: see plugins/eventdedup_airflow.store_pool
SERVICES = ("postgres", "s3", "airflow-api-server", "airflow-scheduler", "airflow-dag-processor",
            "airflow-triggerer", "spark-master", *WORKERS)


@dataclass(frozen=True)
class StackSettings:
    home: Path
    bind: str = "127.0.0.1"
    postgres_host: str = "127.0.0.1"
    postgres_port: int = 55432
    s3_host: str = "127.0.0.1"
    s3_port: int = 59000
    api_host: str = "127.0.0.1"
    api_port: int = 58080
    spark_master_host: str = "127.0.0.1"
    spark_master_port: int = 57077
    spark_ui_port: int = 58090  # the master's; workers use the next two
    driver_host: str = "127.0.0.1"  # where executors reach a driver the scheduler's tasks start
    bucket: str = "eventdedup"
    # The endpoint Airflow's S3 connection names, when not the stack's server (the stack test puts
    # its fault proxy there); and whether the UI asks for a login (scripted screenshots do not).
    connection_s3_endpoint: str = ""
    # Where the connection sends SNS and SQS, when not to AWS (the stack test's moto mocks: the
    # stack's store is S3 only).
    aws_mocks_endpoint: str = ""
    login: bool = True

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> StackSettings:
        def get(name: str, default: object) -> str:
            return environ.get(f"EVENTDEDUP_STACK_{name.upper()}", str(default))

        bind = get("bind", cls.bind)
        hosts = {name: get(name, bind) for name in ("postgres_host", "s3_host", "api_host", "spark_master_host",
                                                   "driver_host")}
        ports = {name: int(get(name, getattr(cls, name))) for name in
                 ("postgres_port", "s3_port", "api_port", "spark_master_port", "spark_ui_port")}
        return cls(home=Path(get("home", PROJECT / ".stack")).resolve(), bind=bind, **hosts, **ports,  # type: ignore[arg-type]
                   connection_s3_endpoint=get("s3_endpoint", ""), aws_mocks_endpoint=get("aws_mocks_endpoint", ""),
                   login=get("login", "true").lower() != "false")

    @property
    def api_url(self) -> str:
        return f"http://{self.api_host}:{self.api_port}"

    @property
    def s3_endpoint(self) -> str:
        return f"http://{self.s3_host}:{self.s3_port}"

    @property
    def spark_master_url(self) -> str:
        return f"spark://{self.spark_master_host}:{self.spark_master_port}"

    def worker_ui_port(self, worker: str) -> int:
        return self.spark_ui_port + 1 + WORKERS.index(worker)


# ---------------------------------------------------------------- secrets and environments

def stack_secrets(settings: StackSettings) -> dict[str, str]:
    """Generated once per stack; S3 credentials may be given (EVENTDEDUP_STACK_S3_ACCESS_KEY /
    _SECRET_KEY in the environment of `up`), else the local server's."""
    path = settings.home / "secrets.json"
    if path.exists():
        return dict(json.loads(path.read_text()))
    values = {"postgres_password": secrets.token_urlsafe(18), "jwt_secret": secrets.token_urlsafe(32),
              "api_secret_key": secrets.token_urlsafe(32), "s3_access_key": "eventdedup-local",
              "s3_secret_key": "eventdedup-local"}
    values |= {name: os.environ[f"EVENTDEDUP_STACK_{name.upper()}"] for name in values
               if f"EVENTDEDUP_STACK_{name.upper()}" in os.environ}
    settings.home.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another service of the stack wrote it first (compose starts several)
        time.sleep(0.5)
        return dict(json.loads(path.read_text()))
    with os.fdopen(fd, "w") as handle:
        json.dump(values, handle)
    return values


def first_start_date(home: Path) -> str:
    """The pipeline's go-live (EVENTDEDUP_START_DATE) for a local installation in `home`: its first
    start, kept across restarts. The DAG runs every interval from it (catchup), so it must not
    move; from any older date a first unpause would queue weeks of runs."""
    path = home / "pipeline_start_date"
    if not path.exists():
        home.mkdir(parents=True, exist_ok=True)
        path.write_text(datetime.now(timezone.utc).replace(second=0, microsecond=0).isoformat())
    return path.read_text().strip()


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def java_env() -> dict[str, str]:
    return {"JAVA_HOME": os.environ["JAVA_HOME"]} if os.environ.get("JAVA_HOME") else {}


def database_url(settings: StackSettings, keys: Mapping[str, str]) -> str:
    return (f"postgresql+psycopg://airflow:{keys['postgres_password']}"
            f"@{settings.postgres_host}:{settings.postgres_port}/airflow")


def airflow_env(settings: StackSettings, keys: Mapping[str, str]) -> dict[str, str]:
    home = settings.home / "airflow"
    passthrough = {k: v for k, v in os.environ.items() if k.startswith("EVENTDEDUP_") and "STACK" not in k}
    return {  # a given EVENTDEDUP_START_DATE wins (passthrough), else this stack's first start
        "EVENTDEDUP_START_DATE": passthrough.get("EVENTDEDUP_START_DATE") or first_start_date(settings.home),
        **passthrough, **java_env(),
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), SYSTEM_PATH]),
        "HOME": os.environ.get("HOME", "/root"), "LANG": "C.UTF-8",
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
        "AIRFLOW__CORE__DAGS_FOLDER": str(PROJECT / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(PROJECT / "plugins"),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": database_url(settings, keys),
        # psycopg 3 serves the async engine too (Airflow would otherwise switch to asyncpg)
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_ASYNC": database_url(settings, keys),
        "AIRFLOW__API__HOST": settings.bind, "AIRFLOW__API__PORT": str(settings.api_port),
        "AIRFLOW__API__SECRET_KEY": keys["api_secret_key"],
        "AIRFLOW__API_AUTH__JWT_SECRET": keys["jwt_secret"],
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{settings.api_url}/execution/",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": str(not settings.login),
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(home / "passwords.json"),
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "30",
        "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(home / "logs"),
        "AIRFLOW_CONN_AWS_DEFAULT": json.dumps({
            "conn_type": "aws", "login": keys["s3_access_key"], "password": keys["s3_secret_key"],
            "extra": {"endpoint_url": settings.connection_s3_endpoint or settings.s3_endpoint,
                      "region_name": "us-east-1",
                      **({"service_config": {service: {"endpoint_url": settings.aws_mocks_endpoint}
                                             for service in ("sns", "sqs")}} if settings.aws_mocks_endpoint else {})}}),
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": f"spark://{settings.spark_master_host}",
                                                  "port": settings.spark_master_port}),
        "EVENTDEDUP_SPARK_JOB_ARCHIVE": str(PROJECT / "dist" / "job" / "eventdedup-job-env.tar.gz"),
        "EVENTDEDUP_SPARK_DRIVER_HOST": settings.driver_host,
        "EVENTDEDUP_STORE_POOL": STORE_POOL,
    }


def advertised_host(settings: StackSettings) -> str:
    """Where others connect: the bind address, or this host's name when listening on every
    interface (in a container, compose gives each service its name as hostname)."""
    return socket.gethostname() if settings.bind == "0.0.0.0" else settings.bind


def spark_env(settings: StackSettings, keys: Mapping[str, str], worker: bool) -> dict[str, str]:
    """Bare on purpose (see the module's docstring): no virtualenv on the PATH, no PYTHONPATH."""
    env = {"PATH": SYSTEM_PATH, "HOME": os.environ.get("HOME", "/root"), "LANG": "C.UTF-8", **java_env(),
           "SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": settings.bind,
           # the name others reach this host's master, worker and executors by (never 0.0.0.0)
           "SPARK_LOCAL_HOSTNAME": advertised_host(settings), "SPARK_NO_DAEMONIZE": "1",
           "SPARK_LOG_DIR": str(settings.home / "logs"),
           # every job unpacks the 100 MiB job archive (~320 MB) per executor: finished applications'
           # directories go after an hour, or a five-minute schedule fills the disk in days
           "SPARK_WORKER_OPTS": "-Dspark.worker.cleanup.enabled=true -Dspark.worker.cleanup.interval=600 "
                                "-Dspark.worker.cleanup.appDataTtl=3600"}
    if worker:  # the host's credentials, as an instance role gives them on AWS
        env |= {"AWS_ACCESS_KEY_ID": keys["s3_access_key"], "AWS_SECRET_ACCESS_KEY": keys["s3_secret_key"],
                "AWS_DEFAULT_REGION": "us-east-1"}
    return env


# ---------------------------------------------------------------- services

def postgres_bin() -> Path:
    for candidate in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (candidate / "postgres").exists():
            return candidate
    sys.exit("make stack needs PostgreSQL: `make stack` installs Debian's postgresql-15 when run as root; "
             "otherwise run `sudo apt-get install postgresql-15`")


def service_command(settings: StackSettings, name: str, keys: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
    """The argv and environment of one service: the single definition `up` and compose share."""
    if name == "postgres":
        data = settings.home / "postgres"
        return ([str(postgres_bin() / "postgres"), "-D", str(data), "-h", settings.bind,
                 "-p", str(settings.postgres_port), "-k", str(data)],
                {"PATH": SYSTEM_PATH, "LANG": "C.UTF-8"})
    if name == "s3":
        return ([sys.executable, "-m", "eventdedup_dev", "local-s3", "--host", settings.bind,
                 "--port", str(settings.s3_port), "--data-dir", str(settings.home / "s3"),
                 "--create-bucket", settings.bucket],
                # the stack's credentials: the store's one identity
                {"PATH": SYSTEM_PATH, "HOME": os.environ.get("HOME", "/root"),
                 "AWS_ACCESS_KEY_ID": keys["s3_access_key"], "AWS_SECRET_ACCESS_KEY": keys["s3_secret_key"]})
    if name.startswith("airflow-"):
        return [sys.executable, "-m", "airflow", name.removeprefix("airflow-")], airflow_env(settings, keys)
    spark_class = str(spark_home() / "bin" / "spark-class")
    if name == "spark-master":
        return ([spark_class, "org.apache.spark.deploy.master.Master", "--host", advertised_host(settings),
                 "--port", str(settings.spark_master_port), "--webui-port", str(settings.spark_ui_port)],
                spark_env(settings, keys, worker=False))
    if name in WORKERS:
        return ([spark_class, "org.apache.spark.deploy.worker.Worker", "--host", advertised_host(settings),
                 "--cores", "1",
                 "--memory", "2g", "--webui-port", str(settings.worker_ui_port(name)),
                 "--work-dir", str(settings.home / name), settings.spark_master_url],
                spark_env(settings, keys, worker=True))
    raise SystemExit(f"unknown service {name!r}; one of: {', '.join(SERVICES)}")


def runs_as_postgres_user() -> bool:
    """PostgreSQL refuses to run as root: as root, its files and process belong to `postgres`."""
    return os.geteuid() == 0


def prepare_postgres(settings: StackSettings, keys: Mapping[str, str]) -> None:
    data = settings.home / "postgres"
    if (data / "PG_VERSION").exists():
        return
    data.mkdir(parents=True, exist_ok=True)
    password_file = settings.home / "postgres.pw"
    with os.fdopen(os.open(password_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as handle:
        handle.write(keys["postgres_password"] + "\n")
    if runs_as_postgres_user():
        shutil.chown(data, "postgres", "postgres")
        shutil.chown(password_file, "postgres", "postgres")
    try:
        done = subprocess.run([str(postgres_bin() / "initdb"), "-D", str(data), "-U", "airflow",
                               f"--pwfile={password_file}", "--auth-local=trust", "--auth-host=scram-sha-256",
                               "-E", "UTF8"], capture_output=True, text=True, **_as_postgres())
    finally:
        password_file.unlink()
    if done.returncode != 0:
        shutil.rmtree(data, ignore_errors=True)
        hint = (" (PostgreSQL runs as the user postgres: every directory above it must be searchable by it)"
                if runs_as_postgres_user() else "")
        raise SystemExit(f"initdb of {data} failed{hint}:\n{done.stderr}")


def create_airflow_database(settings: StackSettings) -> None:
    data = settings.home / "postgres"
    psql = [str(postgres_bin() / "psql"), "-h", str(data), "-p", str(settings.postgres_port), "-U", "airflow",
            "-d", "postgres", "-tAc"]
    exists = subprocess.run([*psql, "SELECT 1 FROM pg_database WHERE datname = 'airflow'"], check=True,
                            capture_output=True, text=True, **_as_postgres()).stdout.strip()
    if exists != "1":
        subprocess.run([*psql, "CREATE DATABASE airflow"], check=True, capture_output=True, **_as_postgres())


def _as_postgres() -> dict[str, object]:
    return {"user": "postgres", "group": "postgres", "extra_groups": []} if runs_as_postgres_user() else {}


# ---------------------------------------------------------------- process bookkeeping

def pid_file(settings: StackSettings, name: str) -> Path:
    return settings.home / "pids" / f"{name}.json"


def stat_fields_of(stat: str) -> list[str]:
    """The fields of a /proc/<pid>/stat text after the command name, from field 3 (the state) on:
    the name may hold spaces and parentheses, so they start after its last ')'."""
    return stat.rsplit(")", 1)[1].split()


def stat_fields(pid: int) -> list[str] | None:
    """`stat_fields_of` the process's stat; None once it is gone."""
    try:
        return stat_fields_of(Path(f"/proc/{pid}/stat").read_text())
    except OSError:
        return None


def start_ticks_of(fields: list[str]) -> int:
    """The kernel's start time of a process (field 22), from its stat fields."""
    return int(fields[19])


def process_start_ticks(pid: int) -> int | None:
    """The kernel's start time of `pid`: with the pid, it names one process, never a reused pid."""
    fields = stat_fields(pid)
    return None if fields is None else start_ticks_of(fields)


def running(settings: StackSettings, name: str) -> int | None:
    path = pid_file(settings, name)
    if not path.exists():
        return None
    record = json.loads(path.read_text())
    return int(record["pid"]) if process_start_ticks(record["pid"]) == record["start"] else None


def start_service(settings: StackSettings, name: str, keys: Mapping[str, str]) -> int:
    if (pid := running(settings, name)) is not None:
        return pid
    argv, env = service_command(settings, name, keys)
    log_path = settings.home / "logs" / f"{name}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    extra = _as_postgres() if name == "postgres" else {}
    if name == "postgres" and runs_as_postgres_user():
        log_path.touch()
        shutil.chown(log_path, "postgres", "postgres")
    with log_path.open("ab") as log:
        process = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   cwd=settings.home, start_new_session=True, **extra)  # type: ignore[call-overload]
    pid_file(settings, name).parent.mkdir(parents=True, exist_ok=True)
    pid_file(settings, name).write_text(json.dumps({"pid": process.pid, "start": process_start_ticks(process.pid)}))
    return int(process.pid)


def stop_service(settings: StackSettings, name: str, timeout: float = 30.0) -> bool:
    """SIGTERM (PostgreSQL: SIGINT, its fast shutdown) to the service's process group, then
    SIGKILL after `timeout`; then whatever the service started in groups of its own (Airflow runs
    each task in one, with spark-submit and the driver JVM below it). Only processes this stack
    started are signalled: the service by pid and start time, its descendants found from it."""
    pid = running(settings, name)
    if pid is None:
        pid_file(settings, name).unlink(missing_ok=True)
        return False
    family = descendants(pid)
    try:
        group = os.getpgid(pid)
        os.killpg(group, signal.SIGINT if name == "postgres" else signal.SIGTERM)
    except ProcessLookupError:  # it ended meanwhile
        group = None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and (group is not None and _group_alive(group)):
        time.sleep(0.2)
    if group is not None and _group_alive(group):
        _signal_quietly(lambda: os.killpg(group, signal.SIGKILL))
    for child, start in family:
        if process_start_ticks(child) == start:  # still the process that was our descendant
            _signal_quietly(lambda child=child: os.kill(child, signal.SIGKILL))  # type: ignore[misc]
    pid_file(settings, name).unlink(missing_ok=True)
    return True


def descendants(root: int) -> list[tuple[int, int]]:
    """Every process below `root` as (pid, start time), from /proc's parent links."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = stat_fields(int(entry))
                if fields is None:
                    continue
                ppid = int(fields[1])
            except (IndexError, ValueError):
                continue
            parents.setdefault(ppid, []).append(int(entry))
    found, queue = [], [root]
    while queue:
        for child in parents.get(queue.pop(), []):
            start = process_start_ticks(child)
            if start is not None:
                found.append((child, start))
                queue.append(child)
    return found


def _signal_quietly(send: Callable[[], None]) -> None:
    try:
        send()
    except (ProcessLookupError, PermissionError):
        pass


def _group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
        return True
    except ProcessLookupError:
        return False


# ---------------------------------------------------------------- readiness

def wait_until(what: str, ready: Callable[[], bool], settings: StackSettings, name: str,
               timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready():
            return
        if running(settings, name) is None:
            raise SystemExit(f"{name} exited while starting; see {settings.home / 'logs' / (name + '.log')}")
        time.sleep(0.5)
    raise SystemExit(f"{what} not ready within {timeout:.0f} s; see {settings.home / 'logs' / (name + '.log')}")


def port_open(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def http_json(url: str) -> object | None:
    try:
        with urllib.request.urlopen(url, timeout=3) as response:
            return json.loads(response.read())
    except (OSError, ValueError):
        return None


def airflow_healthy(settings: StackSettings) -> bool:
    health = http_json(f"{settings.api_url}/api/v2/monitor/health")
    if not isinstance(health, dict):
        return False
    parts = ("metadatabase", "scheduler", "triggerer", "dag_processor")
    return all((health.get(part) or {}).get("status") == "healthy" for part in parts)


def spark_workers_alive(settings: StackSettings) -> int:
    state = http_json(f"http://{settings.spark_master_host}:{settings.spark_ui_port}/json/")
    if not isinstance(state, dict):
        return 0
    return sum(1 for worker in state.get("workers", []) if worker.get("state") == "ALIVE")


# ---------------------------------------------------------------- commands

def up(settings: StackSettings) -> None:
    keys = stack_secrets(settings)
    if not (PROJECT / "dist" / "job" / "eventdedup-job-env.tar.gz").exists():
        raise SystemExit("the job archive is missing: run `make package` (make stack does)")
    prepare_postgres(settings, keys)
    start_service(settings, "postgres", keys)
    wait_until("PostgreSQL", lambda: port_open(settings.postgres_host, settings.postgres_port), settings, "postgres")
    create_airflow_database(settings)
    start_service(settings, "s3", keys)
    initialise_airflow(settings, keys)
    for name in SERVICES[3:]:
        start_service(settings, name, keys)
    start_service(settings, "airflow-api-server", keys)
    wait_until("Spark workers", lambda: spark_workers_alive(settings) == len(WORKERS), settings, "spark-master")
    wait_until("Airflow", lambda: airflow_healthy(settings), settings, "airflow-api-server", timeout=300)


def initialise_airflow(settings: StackSettings, keys: Mapping[str, str]) -> None:
    """The metadata database's schema, and the pools the store tasks take turns in (`store_pools`)."""
    _, env = service_command(settings, "airflow-api-server", keys)
    pools = settings.home / "pools.json"
    pools.write_text(json.dumps(store_pools(env)))
    for command in (["db", "migrate"], ["pools", "import", str(pools)]):
        subprocess.run([sys.executable, "-m", "airflow", *command], env=env, check=True, stdout=subprocess.DEVNULL,
                       cwd=settings.home)


def store_pools(env: Mapping[str, str]) -> dict[str, dict[str, object]]:
    """One one-slot pool for the one configuration's store tasks and one per stream of the streams
    folder the DAGs will run (eventdedup.streams), as `airflow pools import` reads them. A stream
    file added later needs its own: `airflow pools set eventdedup_store_<stream> 1 "..."`."""
    from eventdedup.streams import deployment_folder, read_stream_folder, store_pool_name

    folder = deployment_folder(env, PROJECT / "conf" / "streams")
    names = [STORE_POOL] + [store_pool_name(STORE_POOL, stream.name)
                            for stream in (read_stream_folder(folder, env).streams if folder else ())]
    return {name: {"slots": 1, "description": "eventdedup: one store task at a time", "include_deferred": False}
            for name in names}


# The scheduler first (its tasks' Spark drivers need the workers until they end), the database last.
STOP_ORDER = ("airflow-scheduler", "airflow-triggerer", "airflow-dag-processor", "airflow-api-server", *WORKERS,
              "spark-master", "s3", "postgres")


def down(settings: StackSettings) -> list[str]:
    return [name for name in STOP_ORDER if stop_service(settings, name)]


def admin_password(settings: StackSettings) -> str:
    path = settings.home / "airflow" / "passwords.json"
    return str(json.loads(path.read_text()).get("admin", "?")) if path.exists() else f"(in {path})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="eventdedup_dev.stack", description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("up", "down", "status", "run"))
    parser.add_argument("service", nargs="?", choices=(*SERVICES, "airflow-init"))
    args = parser.parse_args(argv)
    settings = StackSettings.from_env(os.environ)
    if args.command == "run":
        if args.service is None:
            parser.error("run needs a service name")
        if args.service == "airflow-init":  # one-shot: schema and pool (compose runs it before Airflow)
            initialise_airflow(settings, stack_secrets(settings))
            return 0
        command, env = service_command(settings, args.service, stack_secrets(settings))
        os.execvpe(command[0], command, env)
    if args.command == "up":
        up(settings)
        login = f"user admin, password {admin_password(settings)}" if settings.login else "no login: loopback only"
        print(f"Airflow UI:      {settings.api_url}  ({login})")
        print(f"Spark master UI: http://{settings.spark_master_host}:{settings.spark_ui_port}  "
              f"({settings.spark_master_url}, {len(WORKERS)} workers)")
        print(f"S3 endpoint:     {settings.s3_endpoint}  (bucket {settings.bucket})")
        print(f"Logs:            {settings.home / 'logs'} and {settings.home / 'airflow' / 'logs'}; "
              "`make stack-stop` stops it")
    elif args.command == "down":
        stopped = down(settings)
        print(f"stopped: {', '.join(stopped) or 'nothing was running'}")
    else:
        for name in SERVICES:
            pid = running(settings, name)
            print(f"{name:24} {'pid ' + str(pid) if pid else 'stopped'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
