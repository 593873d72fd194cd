"""docker-compose.yaml cannot run here (no Docker engine): check what can be checked without it.
Every service the stack needs is there, every bind-mounted host path and every file the build
copies exists, and the configuration file the DAGs are told to read is one of the mounted ones."""
from __future__ import annotations

import re
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((REPO / "docker-compose.yaml").read_text())


def test_the_stack_has_airflow_3_spark_postgres_and_s3() -> None:
    assert {"postgres", "airflow-init", "airflow-apiserver", "airflow-scheduler", "airflow-dag-processor",
            "airflow-triggerer", "spark-master", "spark-worker", "minio", "create-bucket"} <= set(COMPOSE["services"])
    commands = {name: str(service.get("command", "")) for name, service in COMPOSE["services"].items()}
    assert commands["airflow-apiserver"] == "api-server" and commands["airflow-dag-processor"] == "dag-processor"
    assert "deploy.master.Master" in commands["spark-master"]
    assert "spark://spark-master:7077" in commands["spark-worker"]


def test_every_mounted_path_and_built_file_exists() -> None:
    for name, service in COMPOSE["services"].items():
        for volume in service.get("volumes", []):
            source = volume.split(":", 1)[0]
            if source.startswith((".", "/")):
                assert (REPO / source).exists(), f"{name} mounts missing {source}"
        build = service.get("build")
        if build:
            dockerfile = REPO / build["context"] / build["dockerfile"]
            assert dockerfile.exists(), f"{name}: {dockerfile} missing"
            for source in re.findall(r"^COPY\s+(?:--\S+\s+)*(\S+)\s+\S+$", dockerfile.read_text(), re.MULTILINE):
                assert (REPO / source).exists(), f"{dockerfile.name} copies missing {source}"


def test_airflow_reads_a_mounted_config_and_gets_s3_and_spark_from_connections() -> None:
    env = COMPOSE["services"]["airflow-scheduler"]["environment"]
    mounts = dict(v.split(":", 1)[::-1] for v in COMPOSE["services"]["airflow-scheduler"]["volumes"])
    config = env["EVENTDEDUP_CONFIG"]
    mount_point = next(target for target in mounts if config.startswith(target + "/"))
    assert (REPO / mounts[mount_point] / config[len(mount_point) + 1:]).exists()
    assert '"endpoint_url": "http://minio:9000"' in env["AIRFLOW_CONN_AWS_DEFAULT"]
    assert "spark://spark-master" in env["AIRFLOW_CONN_SPARK_DEFAULT"]
    bucket = re.search(r'bucket = "([^"]+)"', (REPO / "conf" / "eventdedup.airflow.toml").read_text()).group(1)
    assert f"local/{bucket}" in COMPOSE["services"]["create-bucket"]["entrypoint"]
