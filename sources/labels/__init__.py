"""Label normalization: raw source labels -> canonical categories.

Each source has a mapping file here (`<source>.yaml`) that extends `common.yaml`
(the shared vocabulary). A user overrides it with their own YAML file (which may
say `extends: <packaged map>` to change only a few entries) or with ScanNet's
`scannetv2-labels.combined.tsv` (raw_category -> category, merged on top of the
source's map). Why labels are dropped is always recorded by the adapters.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import yaml

from numerical3d.sources.scene import SceneError

LABEL_DIR = Path(__file__).resolve().parent
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when present: 10x faster


def normalize_text(raw: str) -> str:
    """Lower case, `_` as space, single spaces: the form every mapping key is written in."""
    return re.sub(r"\s+", " ", str(raw).replace("_", " ")).strip().lower()


@dataclass(frozen=True)
class LabelDecision:
    """What happens to one raw label: kept as `label`, or dropped for `reason`."""

    label: str | None
    reason: str | None = None
    floor: bool = False


@dataclass
class LabelMap:
    """A raw -> canonical mapping with merges, exclusions and floor labels."""

    name: str
    categories: frozenset[str] = frozenset()
    aliases: dict[str, str] = field(default_factory=dict)
    exclude: frozenset[str] = frozenset()
    floor: frozenset[str] = frozenset()
    unknown: Literal["drop", "keep"] = "drop"

    def resolve(self, raw: str) -> LabelDecision:
        """Map one raw label; the order is floor, alias, exclusion, category, plural, unknown policy."""
        key = normalize_text(raw)
        if not key:
            return LabelDecision(None, "empty label")
        canonical = self.aliases.get(key, key)
        if key in self.floor or canonical in self.floor:
            return LabelDecision(None, "floor (structural)", floor=True)
        if key in self.exclude or canonical in self.exclude:
            return LabelDecision(None, f"excluded label '{canonical}'")
        if canonical in self.categories:
            return LabelDecision(canonical)
        if canonical.endswith("s") and canonical[:-1] in self.categories:
            return LabelDecision(canonical[:-1])
        if self.unknown == "keep":
            return LabelDecision(canonical)
        return LabelDecision(None, f"unknown label '{raw}'")

    def knows(self, raw: str) -> bool:
        """Whether this map decides `raw` itself (kept, merged, excluded or floor), not by its unknown policy."""
        key = normalize_text(raw)
        canonical = self.aliases.get(key, key)
        return (key in self.aliases or key in self.floor or key in self.exclude or canonical in self.categories
                or (canonical.endswith("s") and canonical[:-1] in self.categories))

    def merged(self, other: "LabelMap") -> "LabelMap":
        """`other` on top of self: lists are united, aliases and the unknown policy are overridden."""
        return LabelMap(
            name=other.name,
            categories=self.categories | other.categories,
            aliases={**self.aliases, **other.aliases},
            exclude=self.exclude | other.exclude,
            floor=self.floor | other.floor,
            unknown=other.unknown,
        )


def _as_str_list(value, path: Path, key: str) -> frozenset[str]:
    if value is None:
        return frozenset()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise SceneError(path, f"'{key}' must be a list of strings")
    return frozenset(normalize_text(v) for v in value)


def _read_yaml_map(path: Path, seen: tuple[str, ...] = ()) -> LabelMap:
    try:
        doc = yaml.load(path.read_text(), Loader=_YAML_LOADER)
    except FileNotFoundError as exc:
        raise SceneError(path, "label map file is missing") from exc
    except yaml.YAMLError as exc:
        raise SceneError(path, f"invalid YAML: {exc}") from exc
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise SceneError(path, "label map must be a mapping")
    unexpected = set(doc) - {"extends", "unknown", "floor", "exclude", "categories", "aliases"}
    if unexpected:
        raise SceneError(path, f"unexpected keys {sorted(unexpected)}")
    aliases = doc.get("aliases") or {}
    if not isinstance(aliases, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in aliases.items()):
        raise SceneError(path, "'aliases' must map strings to strings")
    unknown = doc.get("unknown", "drop")
    if unknown not in ("drop", "keep"):
        raise SceneError(path, f"'unknown' must be drop or keep, got {unknown!r}")
    own = LabelMap(
        name=path.stem,
        categories=_as_str_list(doc.get("categories"), path, "categories"),
        aliases={normalize_text(k): normalize_text(v) for k, v in aliases.items()},
        exclude=_as_str_list(doc.get("exclude"), path, "exclude"),
        floor=_as_str_list(doc.get("floor"), path, "floor"),
        unknown=unknown,
    )
    parent = doc.get("extends")
    if parent is None:
        return own
    if not isinstance(parent, str):
        raise SceneError(path, "'extends' must name a packaged label map")
    if parent in seen:
        raise SceneError(path, f"circular 'extends' through {parent}")
    base = _read_yaml_map(packaged_map_path(parent, path), seen + (path.stem,))
    return base.merged(own)


def packaged_map_path(name: str, referrer: Path | None = None) -> Path:
    """Path of a packaged map (`common`, `scannet`, ...)."""
    path = LABEL_DIR / f"{name}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in LABEL_DIR.glob("*.yaml"))
        raise SceneError(referrer or path, f"no packaged label map '{name}' (known: {', '.join(known)})")
    return path


def read_scannet_tsv(path: str | Path, base: LabelMap, column: str = "category") -> LabelMap:
    """Extend `base` with ScanNet's `scannetv2-labels.combined.tsv` (raw_category -> `column`).

    `base` keeps the say over every raw category it already decides, so the vocabulary does not
    depend on whether the table is passed (the table's identity rows such as `couch -> couch` would
    otherwise undo `couch -> sofa`). A raw category `base` does not know is mapped to the table's
    `column`, read through `base`'s own aliases; a target `base` does not know becomes a category.
    """
    path = Path(path)
    try:
        with path.open(newline="") as f:
            rows = list(csv.DictReader(f, delimiter="\t"))
    except FileNotFoundError as exc:
        raise SceneError(path, "label table is missing") from exc
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise SceneError(path, f"unreadable label table: {exc}") from exc
    if not rows or "raw_category" not in rows[0] or column not in rows[0]:
        raise SceneError(path, f"label table needs columns raw_category and {column}")
    aliases: dict[str, str] = {}
    categories: set[str] = set()
    for row in rows:
        raw, target = normalize_text(row["raw_category"] or ""), normalize_text(row[column] or "")
        if not raw or not target or base.knows(raw):
            continue
        aliases[raw] = base.aliases.get(target, target)
        if not base.knows(target):
            categories.add(aliases[raw])
    extra = LabelMap(name=path.stem, categories=frozenset(categories), aliases=aliases, unknown=base.unknown)
    return base.merged(extra)


def load_label_map(source: str, override: str | Path | LabelMap | None = None) -> LabelMap:
    """The label map for `source`, or the user's `override` (YAML file, ScanNet .tsv, or a LabelMap)."""
    if isinstance(override, LabelMap):
        return override
    base = _read_yaml_map(packaged_map_path(source))
    if override is None:
        return base
    path = Path(override)
    if path.suffix.lower() == ".tsv":
        return read_scannet_tsv(path, base)
    return _read_yaml_map(path)
