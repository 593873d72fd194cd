"""The product's shape: it imports without Airflow, moto or Spark, does not depend on moto, its
folders import one way only, down the data's path, and no module depends on itself through others.

Every import counts, wherever it is written: at module level, deferred into a function, or under
`TYPE_CHECKING` (a deferred import is still a dependency; it only hides the cycle from Python).
`from a.b import c` depends on `a.b.c` when that is a module, and on `a.b` (whose `__init__` runs
first) either way.
"""
from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from collections.abc import Mapping
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "include" / "eventdedup"
# The folders in the order data flows through them; a module may import only from its own folder or
# the folders before it. "<top>": the package's top-level modules (configuration, names, S3, codec),
# below everything; "cli": the command line, above everything. spark (the plumbing that starts the
# job) comes after the job whose modules its daemon pre-imports; delta (the table projected from the
# commit log) after the log; promotion (which finishes a commit and rolls the table forward) after
# both; report reads what the operations read.
LEVELS = ["<top>", "parse", "inputs", "commit", "cache", "dedup", "job", "spark", "delta", "promotion", "ops",
          "report", "cli"]


def folder_of(module: str) -> str:
    parts = module.split(".")
    if parts[0] != "eventdedup":
        raise ValueError(module)
    if parts[1:] in (["cli"], ["__main__"]):
        return "cli"
    return parts[1] if len(parts) > 2 or parts[1:] and parts[1] in LEVELS else "<top>"


def module_name(path: Path, root: Path = PACKAGE) -> str:
    relative = path.relative_to(root.parent).with_suffix("")
    return ".".join(part for part in relative.parts if part != "__init__")


def import_graph(sources: Mapping[str, str]) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (every import statement in it, anywhere)."""
    graph: dict[str, set[str]] = {}
    for name, source in sources.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("eventdedup"):
                assert node.level == 0, f"{name}: relative import"
                found.add(node.module)
                found |= {f"{node.module}.{alias.name}" for alias in node.names} & sources.keys()
            elif isinstance(node, ast.Import):
                found |= {alias.name for alias in node.names if alias.name.startswith("eventdedup")}
        graph[name] = {module for module in found if module in sources and module != name}
    return graph


def backward_imports(graph: Mapping[str, set[str]]) -> list[str]:
    return sorted(f"{module} ({folder_of(module)}) imports {imported} ({folder_of(imported)})"
                  for module, imports in graph.items() for imported in imports
                  if imported != "eventdedup" and LEVELS.index(folder_of(imported)) > LEVELS.index(folder_of(module)))


def module_cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in sorted(graph.get(module, ())):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return cycles


def package_sources() -> dict[str, str]:
    return {module_name(path): path.read_text() for path in sorted(PACKAGE.rglob("*.py"))}


def test_every_folder_is_in_the_order() -> None:
    folders = {folder_of(module) for module in package_sources()}
    assert folders == set(LEVELS)


def test_folders_import_one_way_down_the_data_path() -> None:
    assert backward_imports(import_graph(package_sources())) == []


def test_no_module_depends_on_itself_through_others() -> None:
    assert module_cycles(import_graph(package_sources())) == []


@pytest.mark.parametrize("written", [
    "from eventdedup.promotion.promote import promote_batch\n",
    "def later() -> None:\n    from eventdedup.promotion import promote\n",
    "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from eventdedup.promotion.promote import x\n",
])
def test_a_back_edge_or_a_cycle_is_found_however_the_import_is_written(written: str) -> None:
    """The checks above can fail: a commit module importing promotion, at module level, deferred
    into a function, or under TYPE_CHECKING, is a back-edge and (promotion imports the log) a cycle."""
    sources = package_sources()
    sources["eventdedup.commit.log"] += "\n" + written
    graph = import_graph(sources)
    assert "eventdedup.commit.log (commit) imports eventdedup.promotion.promote (promotion)" in backward_imports(graph)
    assert any({"eventdedup.commit.log", "eventdedup.promotion.promote"} <= set(cycle) for cycle in module_cycles(graph))


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
