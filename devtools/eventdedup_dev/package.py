"""`make package`: what a Spark cluster needs to run the dedup job with nothing preinstalled.

    python -m eventdedup_dev.package [--out dist/job]
    python -m eventdedup_dev.package --upload s3://bucket/jobs/eventdedup/ --config conf/prod.toml
    python -m eventdedup_dev.package --upload s3://bucket/jobs/eventdedup/ --streams-dir conf/streams

With --upload (EMR Serverless: EVENTDEDUP_EMR_JOB_ROOT), the entry point, the archive and the
configuration (as eventdedup.toml), or every stream file of a folder (as streams/<name>.toml), are
uploaded there with boto3's default credential chain.

Writes into the output directory:
- `eventdedup-job-env.tar.gz`: a virtualenv packed with venv-pack (the Spark documentation's
  way to ship Python dependencies): eventdedup and packaging/job-requirements.lock, installed
  from this checkout. spark-submit passes it as `--archives …#environment` and executors run
  `./environment/bin/python`. pyspark and py4j are not in it: every Spark installation puts its
  own on the workers' PYTHONPATH.
- `dedup_batch.py`: the spark-submit entry point.
- `manifest.json`: the archive's SHA-256 and size, the versions inside, and the build time.

Why an archive and not `--py-files` (a zip of eventdedup): pyarrow, numpy and orjson are
compiled extensions, and Python cannot import an extension module from a zip, so `--py-files`
would still need them preinstalled on every executor host. The archive's venv links to the
interpreter it was built with (`bin/python` → this machine's python3.11): executor hosts need
a Python 3.11 at that path, which is what a cluster image built from the same base provides
(for EMR Serverless, build inside the EMR image; see the README).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
from importlib.metadata import version
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[2]
ARCHIVE_NAME = "eventdedup-job-env.tar.gz"
ENTRY_POINT = PROJECT / "spark_jobs" / "dedup_batch.py"
JOB_LOCK = PROJECT / "packaging" / "job-requirements.lock"


def base_interpreter() -> str:
    """The Python the virtualenv running this was made from (a venv of a venv would link to it)."""
    return str(Path(sys._base_executable).resolve())  # type: ignore[attr-defined]


def tool(name: str) -> str:
    """A console script of this environment: beside the interpreter in a virtualenv, in the user
    scheme's scripts directory in an image that installs with `pip --user` (apache/airflow)."""
    directories = [Path(sys.executable).parent, Path(sysconfig.get_path("scripts")),
                   Path(sysconfig.get_path("scripts", f"{os.name}_user"))]
    found = shutil.which(name, path=os.pathsep.join([*map(str, directories), os.environ.get("PATH", "")]))
    if found is None:
        raise SystemExit(f"{name} is not installed in this environment (make venv installs it)")
    return found


def build_job_venv(venv: Path) -> None:
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([base_interpreter(), "-m", "venv", "--without-pip", str(venv)], check=True)
    # Compiled bytecode in the archive: an interpreter that cannot write __pycache__ (read-only
    # image, PYTHONDONTWRITEBYTECODE) would otherwise compile every module in every executor.
    uv = [tool("uv"), "pip", "install", "--quiet", "--compile-bytecode", "--python", str(venv / "bin" / "python")]
    subprocess.run([*uv, "-r", str(JOB_LOCK)], check=True)
    # A regular (not editable) install: venv-pack refuses editable ones, and the archive must
    # carry the code itself, not a path into this checkout.
    subprocess.run([*uv, "--no-deps", "--reinstall-package", "eventdedup", str(PROJECT)], check=True)


# The compiled cores and how each says it loaded: the parse core (eventdedup.parse.native_core)
# and the dedup core (eventdedup.native_dedup).
NATIVE_CORES = {"parse": "from eventdedup.parse import native_core as core",
                "dedup": "from eventdedup import native_dedup as core"}


def native_core_loads(venv: Path | None, core: str = "parse") -> bool:
    """Whether a compiled core imports in the job's environment (None: this one). Built for this
    machine's platform; executors of the same platform load it, any other runs pure Python."""
    python = str(venv / "bin" / "python") if venv else sys.executable
    probe = f"{NATIVE_CORES[core]}; raise SystemExit(0 if core.available() else 1)"
    return subprocess.run([python, "-c", probe], cwd=venv or PROJECT, check=False).returncode == 0


def pack(venv: Path, archive: Path) -> None:
    partial = archive.with_name("partial-" + archive.name)
    subprocess.run([tool("venv-pack"), "--prefix", str(venv), "--output", str(partial),
                    "--force", "--quiet"], check=True)
    partial.chmod(0o644)  # read by the Spark workers' user, which may not be the builder
    os.replace(partial, archive)  # never half an archive under the name a submit uses


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def build_package(out: Path, work: Path) -> dict[str, object]:
    started = time.monotonic()
    out.mkdir(parents=True, exist_ok=True)
    venv = work / "job-venv"
    build_job_venv(venv)
    native = {core: native_core_loads(venv, core) for core in NATIVE_CORES}
    for core, loads in native.items():
        if native_core_loads(None, core) and not loads:
            raise SystemExit(f"the compiled {core} core is built here but did not reach the job's environment "
                             "(package-data in pyproject.toml)")
    archive = out / ARCHIVE_NAME
    pack(venv, archive)
    shutil.copy2(ENTRY_POINT, out / ENTRY_POINT.name)
    manifest: dict[str, object] = {
        "archive": ARCHIVE_NAME, "sha256": sha256_of(archive), "bytes": archive.stat().st_size,
        "eventdedup": version("eventdedup"), "python": sys.version.split()[0],
        "interpreter": base_interpreter(), "entry_point": ENTRY_POINT.name,
        "native_parse_core": native["parse"], "native_dedup_core": native["dedup"], "build_seconds": round(time.monotonic() - started, 1),
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def upload(out: Path, root: str, config: Path | None, client: object | None = None,
           streams_dir: Path | None = None) -> list[str]:
    """The files EMR Serverless reads, under `root` (s3://bucket/prefix/): the entry point, the
    archive, and the configuration or each stream's (plugins/eventdedup_emr.py names them)."""
    import boto3

    from eventdedup.streams import stream_files

    bucket, _, prefix = root.removeprefix("s3://").partition("/")
    prefix = prefix.rstrip("/") + "/" if prefix.strip("/") else ""
    client = client or boto3.client("s3")
    uploaded = []
    configs = [(config, "eventdedup.toml")] if config is not None else []
    configs += [(path, f"streams/{path.name}") for path in (stream_files(streams_dir) if streams_dir else [])]
    for source, name in ((out / ENTRY_POINT.name, ENTRY_POINT.name), (out / ARCHIVE_NAME, ARCHIVE_NAME), *configs):
        client.upload_file(str(source), bucket, prefix + name)  # type: ignore[attr-defined]
        uploaded.append(f"s3://{bucket}/{prefix}{name}")
    return uploaded


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=PROJECT / "dist" / "job")
    parser.add_argument("--work", type=Path, default=PROJECT / "build" / "package")
    parser.add_argument("--upload", metavar="S3_PREFIX", help="also upload the job there (EMR Serverless)")
    parser.add_argument("--config", type=Path, help="with --upload: the configuration the job runs with")
    parser.add_argument("--streams-dir", type=Path, help="with --upload: a folder of stream files, each uploaded")
    args = parser.parse_args(argv)
    if args.upload and (not args.upload.startswith("s3://") or (args.config is None and args.streams_dir is None)):
        parser.error("--upload needs an s3:// prefix and --config or --streams-dir")
    manifest = build_package(args.out, args.work)
    print(f"{args.out / ARCHIVE_NAME}: {int(manifest['bytes']) / 2**20:.1f} MiB "  # type: ignore[call-overload]
          f"in {manifest['build_seconds']} s (sha256 {str(manifest['sha256'])[:16]}…)")
    for uri in upload(args.out, args.upload, args.config, streams_dir=args.streams_dir) if args.upload else []:
        print(f"uploaded {uri}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
