"""The product's shape: it imports without Airflow, moto or Spark, does not depend on moto, and
its subpackages import one way only, down the data's path."""
from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "include" / "eventdedup"
# Top-level modules first, then the subpackages in the order data flows through them (spark, the
# plumbing that starts the job, after the job whose modules its daemon pre-imports); a module
# may import only from its own level or the levels before it.
# The Delta table is the commit log's projection, written by whoever finishes a commit: its package
# (delta) is the commit's peer, one level. The report reads what the operations read: their peer.
LEVELS = ["<top>", "parse", "inputs", "commit", "cache", "dedup", "job", "spark", "ops", "cli"]
PEERS = {"delta": "commit", "report": "ops"}


def level_of(module: str) -> int:
    parts = module.split(".")
    if parts[0] != "eventdedup":
        raise ValueError(module)
    if len(parts) > 2 or parts[1] in LEVELS or parts[1] in PEERS:
        package = PEERS.get(parts[1], parts[1])
        return LEVELS.index(package if package in LEVELS else "<top>")
    return 0


def module_name(path: Path) -> str:
    relative = path.relative_to(PACKAGE.parent).with_suffix("")
    return ".".join(part for part in relative.parts if part != "__init__")


def imported_modules(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("eventdedup"):
            assert node.level == 0, f"{path}: relative import"
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.startswith("eventdedup")}
    return found


def test_subpackages_import_one_way_down_the_data_path() -> None:
    backwards = []
    for path in sorted(PACKAGE.rglob("*.py")):
        name = module_name(path)
        if name in ("eventdedup", "eventdedup.__main__"):
            continue
        for imported in imported_modules(path):
            if imported != "eventdedup" and level_of(imported) > level_of(name):
                backwards.append(f"{name} imports {imported}")
    assert backwards == []


def test_every_module_imports_without_airflow_moto_or_a_spark_session() -> None:
    modules = sorted(module_name(p) for p in PACKAGE.rglob("*.py") if p.name != "__main__.py")
    program = (
        "import sys\n"
        "for blocked in ('airflow', 'moto', 'pyspark', 'eventdedup_dev'):\n"
        "    sys.modules[blocked] = None\n"
        f"for name in {modules!r}:\n"
        "    __import__(name)\n"
        "print(len(sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stderr[-2000:]


def test_the_installed_package_does_not_depend_on_moto() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert not [dep for dep in project["dependencies"] if dep.lower().startswith("moto")]
    assert [dep for dep in project["optional-dependencies"]["test"] if dep.lower().startswith("moto")]
