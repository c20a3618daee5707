"""Named profiles of the discrete verifiers' parameters, and the reward a guess earns under each.

Partial credit is what makes discrete rewards dense, but at the final sharpness it also pays a
guess: under the paper's parameters (gamma 1, near-miss direction credit 0.5, count tolerance
tau 1) a random order of four labels earns about 0.5 of the reward and a count one off earns
0.4. A profile rewrites the parameters a spec carries (`gamma` for every discrete kind,
`adjacent_credit` for directions, `tau` for exponential counts), so the same dataset can be
trained under either:

- `paper` (default): the specs as generated, i.e. the paper's appendix values.
- `strict`: gamma 0.25 (below the paper's typical [1, 2]: with eta calibrated on complete
  failure, a smaller gamma maps partial scores to errors nearer that failure), no near-miss
  direction credit and count tolerance tau 0.5, so a chance-level answer of the partial-credit
  kinds earns at most 0.2 at k = 100 (`docs/verifiers.md` has the table).

`apply_profile(spec, name)` is the one hook: a reward function applies it to each spec before
`verify`. Exact hits are never touched, so a multiple-choice or small-class guess still earns
its 1 / n.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import permutations
from typing import Any

from .phi import DEFAULT_PHI, PhiConfig
from .snra import snra
from .spec import validate_spec
from .verify import score_answer

__all__ = ["PROFILES", "VerifierProfile", "apply_profile", "guess_reward", "chance_answers"]


@dataclass(frozen=True)
class VerifierProfile:
    """Parameter overrides for discrete specs; None keeps the spec's own value."""

    name: str
    gamma: float | None = None  # Phi curvature, every discrete kind
    adjacent_credit: float | None = None  # direction score one bin off on the ring
    count_tau: float | None = None  # tolerance of the exponential count score

    def apply(self, spec: dict[str, Any]) -> dict[str, Any]:
        s = dict(validate_spec(spec))
        kind = s["kind"]
        if kind in ("numeric", "grounding"):
            return s
        if self.gamma is not None:
            s["gamma"] = self.gamma
        if kind == "direction" and self.adjacent_credit is not None:
            s["adjacent_credit"] = self.adjacent_credit
        if kind == "count" and self.count_tau is not None and s.get("form", "exp") == "exp":
            s["tau"] = self.count_tau
        return validate_spec(s)


PROFILES: dict[str, VerifierProfile] = {
    "paper": VerifierProfile("paper"),
    "strict": VerifierProfile("strict", gamma=0.25, adjacent_credit=0.0, count_tau=0.5),
}


def apply_profile(spec: dict[str, Any], profile: str | VerifierProfile = "paper") -> dict[str, Any]:
    """The spec under a named profile (`paper` returns it validated and unchanged)."""
    if isinstance(profile, str):
        if profile not in PROFILES:
            raise ValueError(f"unknown verifier profile {profile!r}; known: {', '.join(PROFILES)}")
        profile = PROFILES[profile]
    return profile.apply(spec)


def guess_reward(spec: dict[str, Any], guesses: list[str], k: float = 100.0,
                 profile: str | VerifierProfile = "paper", phi_config: PhiConfig = DEFAULT_PHI) -> float:
    """Mean SNRA reward at sharpness k of the answer texts `guesses`, each equally likely."""
    s = apply_profile(spec, profile)
    errs = [score_answer(s, g, phi_config, validated=True)[1] for g in guesses]
    return float(sum(snra(k, e) for e in errs) / len(errs)) if errs else math.nan


def chance_answers(spec: dict[str, Any]) -> list[str] | None:
    """Every answer a uniform guess can give when the candidates are known from the question:
    each letter, each direction class, each order of the labels; None for other kinds."""
    s = validate_spec(spec)
    kind = s["kind"]
    if kind == "choice":
        return [chr(ord("A") + i) for i in range(len(s["options"]))]
    if kind == "direction":
        return list(s["classes"])
    if kind == "order":
        return [", ".join(p) for p in permutations(s["answer"])]
    return None
