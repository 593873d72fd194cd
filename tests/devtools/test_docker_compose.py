"""docker-compose.yaml cannot run here (no Docker engine): check what can be checked without it.
Every service `make stack` starts runs in compose through the same launcher command, so the two
cannot drift; every bind-mounted host path and every file the build copies exists; the settings
name the other services by their compose names."""
from __future__ import annotations

import re
from pathlib import Path

import yaml

from eventdedup_dev.stack import SERVICES, StackSettings

REPO = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((REPO / "docker-compose.yaml").read_text())
LAUNCHER = ["python", "-m", "eventdedup_dev.stack", "run"]


def test_every_stack_service_runs_the_same_launcher_command_in_compose() -> None:
    services = COMPOSE["services"]
    # PostgreSQL is the official image (its entrypoint creates the database); everything else is ours.
    assert set(services) == {*SERVICES, "airflow-init"}
    for name in (*SERVICES, "airflow-init"):
        if name != "postgres":
            assert services[name]["command"] == [*LAUNCHER, name], name
    assert services["postgres"]["image"].startswith("postgres:")


def test_compose_settings_name_the_services_and_share_the_postgres_password() -> None:
    env = COMPOSE["services"]["airflow-scheduler"]["environment"]
    settings = StackSettings.from_env(env)
    assert settings.bind == "0.0.0.0"
    hosts = {settings.postgres_host, settings.s3_host, settings.api_host, settings.spark_master_host,
             settings.driver_host}
    assert hosts <= set(COMPOSE["services"]), hosts
    assert settings.driver_host == "airflow-scheduler"  # LocalExecutor: drivers run there
    assert env["EVENTDEDUP_STACK_POSTGRES_PASSWORD"] == COMPOSE["services"]["postgres"]["environment"]["POSTGRES_PASSWORD"]
    assert (settings.postgres_port, settings.s3_port, settings.api_port) == (5432, 9000, 8080)
    # Listening on 0.0.0.0, Spark advertises the host's name (eventdedup_dev.stack.advertised_host):
    # in compose, each Spark service's and the drivers' host is named after its service.
    for name in ("spark-master", "spark-worker-1", "spark-worker-2", "airflow-scheduler"):
        assert COMPOSE["services"][name]["hostname"] == name


def test_every_mounted_path_and_built_file_exists() -> None:
    for name, service in COMPOSE["services"].items():
        for volume in service.get("volumes", []):
            source = volume.split(":", 1)[0]
            if source.startswith("./dist"):
                continue  # made by `python -m eventdedup_dev.package` (see the file's header)
            if source.startswith((".", "/")):
                assert (REPO / source).exists(), f"{name} mounts missing {source}"
        build = service.get("build")
        if build:
            dockerfile = REPO / build["context"] / build["dockerfile"]
            assert dockerfile.exists(), f"{name}: {dockerfile} missing"
            for source in re.findall(r"^COPY\s+(?:--\S+\s+)*(\S+)\s+\S+$", dockerfile.read_text(), re.MULTILINE):
                assert (REPO / source).exists(), f"{dockerfile.name} copies missing {source}"
