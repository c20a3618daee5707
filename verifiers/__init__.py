"""Verifiers and rewards for Numerical3D: answer parsing, task verifiers, SNRA,
sharpness schedules, Phi and VSI-Bench's MRA.

This package imports nothing else from the project, so question generation,
scoring and training can all depend on it.
"""

from .parsing import extract_answer, format_ok, format_reward
from .phi import DEFAULT_PHI, PhiConfig, phi
from .profiles import PROFILES, apply_profile
from .schedules import FixedSchedule, LinearSchedule, SigmoidSchedule, make_schedule, sharpness
from .snra import OPERATORS, binary_reward, get_operator, snra, tanh_reward
from .spec import (
    KINDS,
    SPEC_VERSION,
    SpecError,
    answer_text,
    canonical_completion,
    choice_spec,
    count_spec,
    direction_spec,
    grounding_spec,
    numeric_spec,
    order_spec,
    relations_spec,
    validate_spec,
)
from .verify import FORMAT_WEIGHT, VerifyResult, score_answer, verify, verify_batch
from .vsibench import mra, mra_from_text

__all__ = [
    "DEFAULT_PHI", "FORMAT_WEIGHT", "KINDS", "OPERATORS", "PROFILES", "SPEC_VERSION",
    "FixedSchedule", "LinearSchedule", "PhiConfig", "SigmoidSchedule", "SpecError", "VerifyResult",
    "answer_text", "apply_profile", "binary_reward", "canonical_completion", "choice_spec", "count_spec", "direction_spec",
    "extract_answer", "format_ok", "format_reward", "get_operator", "grounding_spec", "make_schedule", "mra",
    "mra_from_text", "numeric_spec", "order_spec", "phi", "relations_spec", "score_answer", "sharpness", "snra",
    "tanh_reward", "validate_spec", "verify", "verify_batch",
]
