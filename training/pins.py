"""The TRL versions the trainer's overrides of private GRPOTrainer methods were written against.

`APGRPOTrainer` and `VideoGRPOMixin` override `_calculate_rewards`, `_generate_and_score_completions`,
`_tokenize_prompts` and `_get_per_token_logps_and_entropies`, whose signatures and defaults changed
within TRL 1.x. A training run on another minor version would fail mid-step or train something else,
so it stops at the start with the supported range instead. pyproject.toml's `train` extra pins the same.
"""

from __future__ import annotations

from importlib import metadata

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from numerical3d.errors import Numerical3DError

TRL_SUPPORTED = SpecifierSet(">=1.16,<1.17")


class UnsupportedTRLError(RuntimeError, Numerical3DError):
    """The installed TRL is outside the range the trainer's overrides were written against."""


def check_trl(version: str | None = None) -> str:
    """The installed TRL version (or `version`), if it is in `TRL_SUPPORTED`; else an error naming the range."""
    if version is None:
        try:
            version = metadata.version("trl")
        except metadata.PackageNotFoundError:
            raise UnsupportedTRLError(f"TRL is not installed; training needs trl{TRL_SUPPORTED} "
                                      f"(pip install -e \".[train]\")") from None
    if Version(version) not in TRL_SUPPORTED:
        raise UnsupportedTRLError(
            f"TRL {version} is installed; the AP-GRPO trainer overrides private TRL methods written against "
            f"trl{TRL_SUPPORTED}: pip install \"trl{TRL_SUPPORTED}\"")
    return version
