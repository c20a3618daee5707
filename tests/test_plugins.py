"""The discovery every registry shares (`numerical3d.plugins`): a package's modules, then entry points;
a name taken twice, a bad object and a broken entry point each fail naming where."""

from __future__ import annotations

import importlib
import sys

import pytest
from distribution import write_distribution

from numerical3d.plugins import Kind


class ThingError(ValueError):
    pass


def kind(package: str) -> Kind[str]:
    return Kind("thing", package, "THINGS", "n3d_test.things", lambda obj: isinstance(obj, str), lambda s: s,
                ThingError)


@pytest.fixture
def on_path(tmp_path, monkeypatch):
    """A package `bundled` (modules a, b, _private) and a folder of installed distributions, on sys.path."""
    pkg = tmp_path / "bundled"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("THINGS = ('alpha', 'beta')\n")
    (pkg / "b.py").write_text("OTHER = 1\n")
    (pkg / "_private.py").write_text("THINGS = ('hidden',)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in [m for m in sys.modules if m.split(".")[0] in ("bundled", "extra")]:
        del sys.modules[name]
    importlib.invalidate_caches()


def install(root, module: str, points: dict[str, str]) -> None:
    write_distribution(root, "extra", module, {"n3d_test.things": points})
    importlib.invalidate_caches()


def test_modules_then_entry_points_in_name_order(on_path):
    install(on_path, "THINGS = ('gamma',)\nONE = 'delta'\n", {"z": "extra", "y": "extra:ONE"})
    assert list(kind("bundled").found()) == [("alpha", "bundled.a"), ("beta", "bundled.a"),
                                             ("delta", "entry point y = extra:ONE"), ("gamma", "entry point z = extra")]
    assert list(kind("bundled").by_name()) == ["alpha", "beta", "delta", "gamma"]


@pytest.mark.parametrize("module, points, message", [
    ("THINGS = (''.join(['al', 'pha']),)\n", {"x": "extra"},  # an equal name, another object
     "thing 'alpha' is defined twice: in bundled.a and in entry point x = extra"),
    ("ONE = 3\n", {"x": "extra:ONE"}, "entry point x = extra:ONE: 3 is not a thing"),
    ("OTHER = 1\n", {"x": "extra"}, "entry point x = extra: a module without THINGS"),
    ("OTHER = 1\n", {"x": "extra:MISSING"}, "entry point x = extra:MISSING: cannot be loaded"),
])
def test_a_bad_registration_fails_naming_where(on_path, module, points, message):
    install(on_path, module, points)
    with pytest.raises(ThingError, match=message.replace("(", r"\(").replace(")", r"\)")):
        kind("bundled").by_name()
