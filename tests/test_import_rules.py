"""The import rules of the layout (issue 11), checked on the source: every `import` and `from ...
import` of every module, including the lazy ones inside functions and relative ones, resolved
to the project's top-level name.

    pipeline   never imports flows, numerical3d or training
    training   never imports pipeline, sources, flows or numerical3d (it reads the published dataset)
    sources    never imports pipeline, training, flows or numerical3d
    verifiers  imports nothing else of the project
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PROJECT = {"flows", "numerical3d", "pipeline", "sources", "templates", "training", "verifiers"}
FORBIDDEN = {
    "pipeline": {"flows", "numerical3d", "training"},
    "training": {"pipeline", "sources", "flows", "numerical3d"},
    "sources": {"pipeline", "training", "flows", "numerical3d"},
    "verifiers": PROJECT - {"verifiers"},
}


def imported_modules(path: Path, module: str) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in the file of `module` (dotted name)."""
    is_package = path.name == "__init__.py"
    package = module.split(".") if is_package else module.split(".")[:-1]
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            name = ".".join(base + ([node.module] if node.module else []))
            found.append((node.lineno, name))
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) in (
                "import_module", "__import__") and node.args and isinstance(node.args[0], ast.Constant):
            found.append((node.lineno, str(node.args[0].value)))
    return found


def violations(root: Path, package: str) -> list[str]:
    out = []
    for path in sorted((root / package).rglob("*.py")):
        module = ".".join(path.relative_to(root).with_suffix("").parts)
        for line, name in imported_modules(path, module):
            if name.split(".")[0] in FORBIDDEN[package]:
                out.append(f"{path.relative_to(root)}:{line} imports {name}")
    return out


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_layout_import_rules(package):
    assert (REPO / package / "__init__.py").exists()
    assert violations(REPO, package) == []


def test_checker_sees_lazy_relative_and_dynamic_imports(tmp_path):
    (tmp_path / "pipeline" / "cli").mkdir(parents=True)
    (tmp_path / "pipeline" / "__init__.py").write_text("")
    (tmp_path / "pipeline" / "cli" / "__init__.py").write_text("from .. import build\n")
    (tmp_path / "pipeline" / "cli" / "run.py").write_text(
        "import typer\n\n\ndef go():\n    import flows\n    from training.run import run_training\n"
        "    importlib.import_module('numerical3d')\n    from ..sampling import sample\n")
    assert violations(tmp_path, "pipeline") == [
        "pipeline/cli/run.py:5 imports flows",
        "pipeline/cli/run.py:6 imports training.run",
        "pipeline/cli/run.py:7 imports numerical3d",
    ]
    run = tmp_path / "pipeline" / "cli" / "run.py"
    assert (8, "pipeline.sampling") in imported_modules(run, "pipeline.cli.run")
    assert imported_modules(tmp_path / "pipeline" / "cli" / "__init__.py", "pipeline.cli") == [(1, "pipeline")]


def test_console_script_help_imports_no_heavy_stack():
    """`numerical3d --help` stays fast: the root and both command groups load without Prefect or torch."""
    import subprocess
    import sys

    code = ("import sys; from typer.testing import CliRunner; import numerical3d; "
            "r = CliRunner().invoke(numerical3d.app, ['--help']); assert r.exit_code == 0, r.output; "
            "print(sorted(m for m in ('prefect', 'torch', 'transformers', 'trl', 'open3d', 'datasets', 'flows') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.strip() == "[]"
