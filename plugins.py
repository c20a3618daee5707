"""The one way the project's registries find what they hold: the modules of a package, then entry points.

Sources (`sources/__init__.py`), subtasks (`pipeline/questions/registry.py`) and benchmarks
(`training/benchmarks/registry.py`) each name a package, a module attribute (`SOURCES`, `SUBTASK`,
`BENCHMARK`) and an entry point group (`numerical3d.sources`, `numerical3d.subtasks`,
`numerical3d.benchmarks`). A module of the package registers by holding the attribute; another
distribution registers by an entry point naming the object, a tuple of them, or a module holding
the attribute (a folder on `sys.path` with a `*.dist-info/entry_points.txt` counts as installed).

This module imports nothing of the project, so every layer can use it.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib.metadata import entry_points
from types import ModuleType
from typing import Any, Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Kind(Generic[T]):
    """What one registry holds and where it looks for it."""

    what: str  # "source", "subtask", "benchmark": how messages name one
    package: str  # the package whose modules are scanned (names starting with "_" are skipped)
    attribute: str  # the module attribute that registers: one object or a tuple of them
    group: str  # the entry point group of other distributions
    accepts: Callable[[Any], bool]  # whether an object is one of these
    name_of: Callable[[T], str]  # the name it is registered under
    error: type[Exception] = ValueError  # raised for a bad registration

    def found(self) -> Iterator[tuple[T, str]]:
        """(object, where it was found) of every registration: the package's modules in name order,
        then the entry points in name order."""
        package = importlib.import_module(self.package)
        for name in sorted(m.name for m in pkgutil.iter_modules(package.__path__)):
            if not name.startswith("_"):
                module = importlib.import_module(f"{self.package}.{name}")
                yield from self._from_module(module, module.__name__, optional=True)
        for ep in sorted(entry_points(group=self.group), key=lambda e: e.name):
            where = f"entry point {ep.name} = {ep.value}"
            try:
                obj = ep.load()
            except Exception as exc:  # a broken plugin names itself instead of failing somewhere later
                raise self.error(f"{where}: cannot be loaded: {exc}") from exc
            if isinstance(obj, ModuleType):
                yield from self._from_module(obj, where, optional=False)
            else:
                yield from self._checked(obj, where)

    def _from_module(self, module: ModuleType, where: str, optional: bool) -> Iterator[tuple[T, str]]:
        obj = getattr(module, self.attribute, None)
        if obj is None and not optional:
            raise self.error(f"{where}: a module without {self.attribute}")
        if obj is not None:
            yield from self._checked(obj, where)

    def _checked(self, obj: Any, where: str) -> Iterator[tuple[T, str]]:
        for one in obj if isinstance(obj, tuple) else (obj,):
            if not self.accepts(one):
                raise self.error(f"{where}: {one!r} is not a {self.what}")
            yield one, where

    def by_name(self) -> dict[str, T]:
        """Every registered object by name, in the order found; a name taken twice fails naming both places."""
        out: dict[str, T] = {}
        where: dict[str, str] = {}
        for obj, place in self.found():
            name = self.name_of(obj)
            if name in out and out[name] is not obj:
                raise self.error(f"{self.what} {name!r} is defined twice: in {where[name]} and in {place}")
            out[name] = obj
            where.setdefault(name, place)
        return out
