"""How every configuration file of the project is read and layered: one YAML reader, one merge, one error.

Build plans and dataset mixes (`pipeline/settings.py`, `pipeline/build/plan.py`, `pipeline/config.py`),
training configs and their `base:` chain (`training/config.py`) and accelerate configs
(`training/memory.py`) all read a file with `read_yaml_mapping` and layer with `deep_merge`: a plan
over its preset, the options over the plan, a plan's `dataset_overrides` over its mix, a training
config over its `base:`.
This module imports nothing of the project, so both `pipeline` and `training` use it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from numerical3d.errors import Numerical3DError


class ConfigError(ValueError, Numerical3DError):
    """A config file cannot be read or is invalid; names the file and the problem."""


def read_yaml_mapping(path: Path, error: type[Exception] = ConfigError, what: str = "config") -> dict[str, Any]:
    """The top-level mapping of a YAML file (an empty file is an empty mapping); `error` names the file
    and the problem in one line."""
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise error(f"{path}: cannot read {what}: {exc}") from None
    except yaml.YAMLError as exc:
        raise error(f"{path}: not valid YAML: {' '.join(str(exc).split())}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise error(f"{path}: expected a mapping at the top level of a {what}, got {type(data).__name__}")
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
