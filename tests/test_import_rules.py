"""The import rules of the layout, checked on the source: every `import` and `from ... import` of
every module, including the lazy ones inside functions, those under `TYPE_CHECKING`, relative ones,
and `importlib.import_module` / `importlib.resources.files` calls with a literal name.

The repository root is the package `numerical3d`; its folders are the subpackages. Data flows one
way, and imports follow it:

    pipeline   never imports flows, plain_build, prefect_engine, cli or training
    training   never imports pipeline, sources, flows, plain_build, prefect_engine or cli (it reads the published dataset)
    sources    never imports pipeline, training, flows, plain_build, prefect_engine or cli
    plugins, configfile, options  (registry discovery; config files; options from a model) import nothing else of the project but
               `errors`; all but verifiers and dataset may import them
    verifiers  imports nothing else of the project but `errors` (the one error base)
    dataset    imports nothing else of the project but `errors` (the folder reader both pipeline and training use)

No module imports the project by a bare top-level name (`import pipeline`): installed, those names
do not exist. And no two modules import each other, directly or through others.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ROOT = "numerical3d"
PARTS = {"cli", "configfile", "dataset", "errors", "flows", "options", "plain_build", "pipeline", "plugins",
         "prefect_engine", "sources", "templates", "training", "verifiers"}
SHARED = ("configfile", "options", "plugins")  # modules every part but verifiers and dataset may import
RUNNERS = {"cli", "flows", "plain_build", "prefect_engine"}
FORBIDDEN = {
    "pipeline": RUNNERS | {"training"},
    "training": RUNNERS | {"pipeline", "sources"},
    "sources": RUNNERS | {"pipeline", "training"},
    "verifiers": PARTS - {"verifiers", "errors"},
    "dataset": PARTS - {"dataset", "errors"},
}
SKIP_DIRS = {"tests", "benchmarks", "docs", "build", "dist"}


def module_files(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package rooted at `root`."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if rel.parts[0] in SKIP_DIRS or any(p.startswith(".") or p == "__pycache__" for p in rel.parts):
            continue
        parts = list(rel.with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join([ROOT, *parts])] = path
    return out


def imported_modules(path: Path, module: str) -> list[tuple[int, str, tuple[str, ...]]]:
    """(line, absolute module name, names imported from it) of every import in the file of `module`."""
    is_package = path.name == "__init__.py"
    package = module.split(".") if is_package else module.split(".")[:-1]
    found: list[tuple[int, str, tuple[str, ...]]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, ()) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            name = ".".join(base + ([node.module] if node.module else []))
            found.append((node.lineno, name, tuple(a.name for a in node.names)))
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) in (
                "import_module", "__import__", "files") and node.args and isinstance(node.args[0], ast.Constant):
            found.append((node.lineno, str(node.args[0].value), ()))
    return found


def targets(name: str, names: tuple[str, ...], modules: dict[str, Path]) -> set[str]:
    """The project modules an import statement loads: a submodule named in `from pkg import sub`,
    else the package itself (its `__init__` runs to provide the name)."""
    out = set()
    for n in names:
        if f"{name}.{n}" in modules:
            out.add(f"{name}.{n}")
        elif name in modules:
            out.add(name)
    if not names and name in modules:
        out.add(name)
    return out


def import_graph(root: Path) -> dict[str, set[str]]:
    modules = module_files(root)
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        for _, name, names in imported_modules(path, module):
            graph[module] |= targets(name, names, modules) - {module}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def violations(root: Path, part: str) -> list[str]:
    out = []
    for module, path in module_files(root).items():
        if module.split(".")[1:2] != [part]:
            continue
        for line, name, _ in imported_modules(path, module):
            head = name.split(".")
            if head[0] in PARTS:
                out.append(f"{path.relative_to(root)}:{line} imports {name} by a bare top-level name")
            elif head[0] == ROOT and len(head) > 1 and head[1] in FORBIDDEN[part]:
                out.append(f"{path.relative_to(root)}:{line} imports {name}")
    return out


@pytest.mark.parametrize("part", sorted(FORBIDDEN))
def test_layout_import_rules(part):
    assert (REPO / part / "__init__.py").exists()
    assert violations(REPO, part) == []


@pytest.mark.parametrize("module", SHARED)
def test_shared_modules_import_nothing_of_the_project_but_errors(module):
    path = REPO / f"{module}.py"
    assert [name for _, name, _ in imported_modules(path, f"{ROOT}.{module}")
            if name.split(".")[0] in (ROOT, *PARTS) and name != f"{ROOT}.errors"] == []


def test_no_module_imports_the_project_by_a_bare_name():
    bad = [f"{path.relative_to(REPO)}:{line} imports {name}"
           for module, path in module_files(REPO).items()
           for line, name, _ in imported_modules(path, module) if name.split(".")[0] in PARTS]
    assert bad == []


def test_no_import_cycle():
    assert cycles(import_graph(REPO)) == []


def test_every_package_folder_is_installed():
    """pyproject lists the subpackages by hand (the root maps to `numerical3d`): a new folder is caught here."""
    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    packages = {m for m, p in module_files(REPO).items() if p.name == "__init__.py"}
    assert listed == packages


def test_checker_sees_lazy_relative_typing_and_dynamic_imports(tmp_path):
    (tmp_path / "pipeline" / "cli").mkdir(parents=True)
    (tmp_path / "__init__.py").write_text("")
    (tmp_path / "pipeline" / "__init__.py").write_text("")
    (tmp_path / "pipeline" / "cli" / "__init__.py").write_text("from .. import build\n")
    (tmp_path / "pipeline" / "build.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from numerical3d.pipeline.cli import run\n")
    (tmp_path / "pipeline" / "cli" / "run.py").write_text(
        "import typer\n\n\ndef go():\n    import flows\n    from numerical3d.training.run import run_training\n"
        "    importlib.import_module('numerical3d.cli')\n    from ..build import x\n    files('templates')\n")
    assert violations(tmp_path, "pipeline") == [
        "pipeline/cli/run.py:5 imports flows by a bare top-level name",
        "pipeline/cli/run.py:6 imports numerical3d.training.run",
        "pipeline/cli/run.py:7 imports numerical3d.cli",
        "pipeline/cli/run.py:9 imports templates by a bare top-level name",
    ]
    run = tmp_path / "pipeline" / "cli" / "run.py"
    assert (8, "numerical3d.pipeline.build", ("x",)) in imported_modules(run, "numerical3d.pipeline.cli.run")
    # build -> cli.run (under TYPE_CHECKING) -> build (inside a function): one cycle.
    assert cycles(import_graph(tmp_path)) == [["numerical3d.pipeline.build", "numerical3d.pipeline.cli.run"]]


def test_console_script_help_imports_no_heavy_stack():
    """`numerical3d --help` stays fast: the root and both command groups load without Prefect or torch."""
    code = ("import sys; from typer.testing import CliRunner; from numerical3d import cli; "
            "r = CliRunner().invoke(cli.app, ['--help']); assert r.exit_code == 0, r.output; "
            "print(sorted(m for m in ('prefect', 'torch', 'transformers', 'trl', 'open3d', 'datasets', "
            "'numerical3d.flows') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.strip() == "[]"
