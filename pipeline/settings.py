"""How every configuration file is read: a YAML mapping, layered with `deep_merge`, then
validated by a pydantic model whose unknown keys are errors naming the field.

Build plans (`pipeline.build.plan`), dataset mixes (`pipeline.config`) and the question
config inside a plan all go this way; the presets of both kinds live in `pipeline/presets/`
(`plans/` and `mixes/`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

PRESETS_DIR = Path(__file__).resolve().parent / "presets"


class ConfigError(ValueError):
    """A config file cannot be read or is invalid; names the file and the problem."""


def read_yaml_mapping(path: Path, error: type[ConfigError] = ConfigError) -> dict[str, Any]:
    """The top-level mapping of a YAML file (an empty file is an empty mapping)."""
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise error(f"{path}: cannot read: {exc}") from exc
    except yaml.YAMLError as exc:
        raise error(f"{path}: not valid YAML: {exc}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise error(f"{path}: expected a mapping at the top level, got {type(data).__name__}")
    return data


def deep_merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    """`top` layered over `base`: nested mappings merge key by key, anything else is replaced."""
    merged = dict(base)
    for key, value in top.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def presets(kind: str) -> list[str]:
    """Names of the bundled presets of one kind (`plans` or `mixes`)."""
    return sorted(p.stem for p in (PRESETS_DIR / kind).glob("*.yaml"))

