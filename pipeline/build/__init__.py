"""The dataset build as plain stage functions and their one order (`run_build`); `flows.py`
(Prefect) and `plain_build.py` (no Prefect) are the two executors that run it, with the same results.

- `plan`: the build plan (`BuildPlan`, `resolve_plan`, presets, `RetryPolicy`).
- `cache`: fingerprints, scene keys, result files.
- `jobs`: `SceneJob`, one scene to process.
- `scenes`: synthetic inputs, one `SceneJob` per scene (`enumerate_plan`), `process_scene`.
- `isolate`: a scene with a timeout in a process of its own, killed at the timeout (`run_scene`).
- `assemble`: sampling, shards, card and the build's reports (`assemble`, `BuildSummary`), and
  what counts as a finished build (`require_complete`, `IncompleteBuild`).
- `output`: the output folder: refused when it is not ours (`check_out`), written through a
  staging folder and swapped in whole (`OutputRefused`, `clean_stale`).
- `check`: `sources check` (`check_plan`).
- `events`: the progress callback runners take (`OnEvent`, `listening`).
- `lock`: one build per output folder (`build_lock`, `BuildLocked`).
- `run`: the stage order, once (`run_build`); an `Executor` supplies how the scenes are mapped and
  its hooks.

Everything is deterministic for a given plan and seed, whatever the order in which the scenes
finish, so a build killed midway and rerun writes byte-identical shards.
"""

from numerical3d.pipeline.build.assemble import (
    BuildSummary,
    IncompleteBuild,
    assemble,
    jsonable,
    quarantine_markdown,
    require_complete,
)
from numerical3d.pipeline.build.check import CheckReport, check_plan
from numerical3d.pipeline.build.events import OnEvent, ignore, listener, listening
from numerical3d.pipeline.build.isolate import run_scene
from numerical3d.pipeline.build.jobs import SceneJob
from numerical3d.pipeline.build.lock import BuildLocked, Holder, build_lock, ensure_unlocked
from numerical3d.pipeline.build.output import OutputRefused, check_out, clean_stale
from numerical3d.pipeline.build.plan import (
    CACHE_ENV,
    BuildPlan,
    PlanError,
    RetryPolicy,
    SyntheticSpec,
    build_presets,
    load_plan,
    resolve_plan,
    write_plan,
)
from numerical3d.pipeline.build.run import Executor, Stages, run_build
from numerical3d.pipeline.build.scenes import (
    SceneOutcome,
    cached_outcome,
    enumerate_plan,
    failed_outcome,
    is_transient,
    largest_first,
    prepare_synthetic,
    process_scene,
)

__all__ = [
    "CACHE_ENV",
    "BuildLocked",
    "BuildPlan",
    "BuildSummary",
    "CheckReport",
    "Executor",
    "Holder",
    "IncompleteBuild",
    "OnEvent",
    "OutputRefused",
    "PlanError",
    "RetryPolicy",
    "SceneJob",
    "Stages",
    "SceneOutcome",
    "SyntheticSpec",
    "assemble",
    "build_lock",
    "build_presets",
    "cached_outcome",
    "check_out",
    "check_plan",
    "clean_stale",
    "ensure_unlocked",
    "enumerate_plan",
    "failed_outcome",
    "ignore",
    "is_transient",
    "jsonable",
    "largest_first",
    "listener",
    "listening",
    "load_plan",
    "prepare_synthetic",
    "process_scene",
    "quarantine_markdown",
    "require_complete",
    "resolve_plan",
    "run_build",
    "run_scene",
    "write_plan",
]
