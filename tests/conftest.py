"""Shared fixtures: a real S3 store (SeaweedFS) on 127.0.0.1, moto's AWS API mocks (SNS, SQS, EMR
Serverless: what has no real local counterpart) and one local SparkContext per test run."""
from __future__ import annotations

import itertools
import os
import random
import sys
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from eventdedup.config import Config
from eventdedup.s3store import S3Store
from eventdedup_dev.local_s3 import LocalAwsMocks, LocalS3Process, use_local_credentials

from .support.canaries import S3_IDENTITIES
from .support.helpers import make_config

# Spark's Python workers must use this interpreter (the virtualenv's), and stay on loopback.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
use_local_credentials()
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
# Every JVM the tests start (the shared session, spark-submit under Airflow, CLI subprocesses)
# lives seconds to minutes: C1-only JIT and the serial collector cut its CPU by ~28% (measured),
# and the suite is CPU-bound on 2 cores. Production drivers get C1-only too (eventdedup.spark.driver_start);
# the serial collector is the tests' alone.
os.environ.setdefault("JDK_JAVA_OPTIONS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")

_bucket_numbers = itertools.count(1)

# CI runs a fixed set of examples (derandomised, no example database), so a red build is
# reproducible; `HYPOTHESIS_PROFILE=explore make test` searches many more random ones.
settings.register_profile("ci", derandomize=True, database=None, deadline=None, max_examples=150,
                          suppress_health_check=[HealthCheck.function_scoped_fixture])
settings.register_profile("explore", database=None, deadline=None, max_examples=2000,
                          suppress_health_check=[HealthCheck.function_scoped_fixture])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--shuffle", type=int, metavar="SEED", default=None,
                     help="run the modules in a shuffled order, and each module's tests in a shuffled order "
                          "(seeded: the same SEED gives the same order on every xdist worker and every rerun)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """`--shuffle SEED` shuffles the order (modules, then tests within each, as pytest-randomly
    does: a module's fixtures are still set up once). Under pytest-xdist, every Airflow test runs
    in one worker: one Airflow home, one SQLite database migrated once. Other tests go wherever a
    worker is free."""
    seed = config.getoption("--shuffle")
    if seed is not None:
        rng = random.Random(seed)
        modules: dict[str, list[pytest.Item]] = {}
        for item in items:
            modules.setdefault(str(item.path), []).append(item)
        order = list(modules.values())
        rng.shuffle(order)
        for tests in order:
            rng.shuffle(tests)
        items[:] = [item for tests in order for item in tests]
    for item in items:
        if "/tests/dags/" in str(item.path):
            item.add_marker(pytest.mark.xdist_group("airflow"))


@pytest.fixture(scope="session")
def s3_server() -> Iterator[LocalS3Process]:
    with LocalS3Process(identities=S3_IDENTITIES) as server:
        yield server


@pytest.fixture(scope="session")
def aws_mocks() -> Iterator[LocalAwsMocks]:
    with LocalAwsMocks() as mocks:
        yield mocks


@pytest.fixture
def bucket(s3_server: LocalS3Process) -> Iterator[str]:
    """A fresh bucket per test: tests never see each other's objects. Deleted, with what it holds,
    after the test: SeaweedFS gives each bucket a volume of its own, and a session makes hundreds."""
    name = f"test-{os.getpid()}-{next(_bucket_numbers):05d}"
    s3_server.client().create_bucket(Bucket=name)
    yield name
    s3_server.delete_bucket(name)


@pytest.fixture
def config(s3_server: LocalS3Process, bucket: str) -> Config:
    return make_config(s3_server.endpoint_url, bucket)


@pytest.fixture
def store(s3_server: LocalS3Process, config: Config) -> S3Store:
    return S3Store(s3_server.client(), config.s3.bucket)


@pytest.fixture(scope="session")
def spark():  # type: ignore[no-untyped-def]
    from eventdedup.config import SparkSettings
    from eventdedup.spark.session import build_spark_context

    # A SparkContext, as the CLI starts: the job is RDD-only.
    context = build_spark_context(SparkSettings(master="local[2]", partitions=4, driver_memory="2g"), "eventdedup-tests")
    yield context
    context.stop()
