"""What `pip install .` puts into site-packages: one import package, `numerical3d`, with every
module and data file the code reads, and none of the short names (`verifiers`, `pipeline`, ...)
that other distributions of this field also install."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHIPPED_SUFFIXES = {".py", ".yaml", ".j2", ".tsv", ".json"}
NOT_SHIPPED = ("tests/", "benchmarks/", "docs/", ".ci/")


def _outputs(folder: str, names: list[str]) -> set[str]:
    """What a copy of the source leaves out: git, caches, and the root's build outputs."""
    skip = {n for n in names if n in (".git", "__pycache__", ".pytest_cache", ".hypothesis") or n.endswith(".egg-info")}
    if Path(folder) == REPO:
        skip |= {n for n in names if n in ("build", "dist")}
    return skip


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """`pip install` of a private copy of the source: a build never writes into the checkout (its
    `build/` and `*.egg-info` would be shared by test workers and by the editable install)."""
    source = tmp_path_factory.mktemp("source") / "numerical3d"
    shutil.copytree(REPO, source, ignore=_outputs)
    target = tmp_path_factory.mktemp("site")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                    "--no-compile", "--target", str(target), str(source)], check=True, capture_output=True)
    return target


@pytest.mark.slow
def test_only_numerical3d_is_installed_at_the_top(installed):
    top = sorted(p.name for p in installed.iterdir() if p.name not in ("bin",))
    assert [n for n in top if not n.endswith(".dist-info")] == ["numerical3d"]
    assert len([n for n in top if n.endswith(".dist-info")]) == 1


@pytest.mark.slow
def test_every_tracked_source_and_data_file_is_shipped(installed):
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True).stdout.split()
    if not tracked:
        pytest.skip("not a git checkout")
    expected = {f for f in tracked if Path(f).suffix in SHIPPED_SUFFIXES and not f.startswith(NOT_SHIPPED)}
    missing = sorted(f for f in expected if not (installed / "numerical3d" / f).is_file())
    assert missing == []


@pytest.mark.slow
def test_short_names_are_not_importable_and_the_namespace_is(installed, tmp_path):
    env_code = ("import importlib, sys\n"
                "for n in ('verifiers', 'pipeline', 'sources', 'training', 'templates', 'flows', 'plain_build'):\n"
                "    try:\n        importlib.import_module(n)\n    except ModuleNotFoundError:\n        pass\n"
                "    else:\n        sys.exit(f'{n} is importable')\n"
                "import numerical3d.verifiers as v\n"
                f"assert v.__file__.startswith({str(installed)!r}), v.__file__\n"
                "print(v.snra(0.0, 10.0))\n")
    out = subprocess.run([sys.executable, "-c", env_code], cwd=tmp_path, capture_output=True, text=True,
                         env={"PYTHONPATH": str(installed), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert float(out.stdout) == 1.0


@pytest.mark.slow
def test_the_installed_package_finds_its_subtasks_and_templates(installed, tmp_path):
    """From any folder: the subtask registry scans the installed package, and templates come from it."""
    code = ("from numerical3d.pipeline.questions.registry import registry\n"
            "from numerical3d.pipeline.templating import templates\n"
            "tpl = templates()\n"
            "for name in registry():\n"
            "    assert tpl.n_paraphrases(name) >= 3, name\n"
            "print(len(registry()))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(installed)})
    assert out.returncode == 0, out.stderr
    from numerical3d.pipeline.questions.registry import registry

    assert int(out.stdout) == len(registry())
