"""A subtask that falls short of its quota is reported with why: what generation dropped for it
and the evaluation scenes excluded (`pipeline/shortfall.py`)."""

from __future__ import annotations

from numerical3d.pipeline.sampling import sample
from numerical3d.pipeline.shortfall import explain_shortfalls, generation_causes

# what a box-only source's scenes report: no frames for the frame-level subtasks, one row per scene
BOX_ONLY_DROPS = [
    {"stage": "gate", "owner": "camera_distance", "what": "candidate", "reason": "source_has_no_frames", "count": 3},
    {"stage": "gate", "owner": "object_count", "what": "candidate", "reason": "count_below_min", "count": 40},
    {"stage": "gate", "owner": "object_count", "what": "candidate", "reason": "object_not_visible", "count": 7},
    {"stage": "gate", "owner": "object_count", "what": "candidate", "reason": "count_above_max", "count": 2},
    {"stage": "source", "owner": "vsi-meta", "what": "label", "reason": "no count question", "count": 5},
]


def _short_line(rep, name: str) -> str:
    lines = [w for w in rep.warnings if w.startswith(f"subtask {name}: quota")]
    assert len(lines) == 1, rep.warnings
    return lines[0]


def test_generation_causes_name_the_largest_losses_per_subtask():
    causes = generation_causes(BOX_ONLY_DROPS)
    assert causes == {"camera_distance": ["source_has_no_frames in 3 scenes"],
                      "object_count": ["object_not_visible: 7 candidates", "count_above_max: 2 candidates"]}


def test_a_box_only_source_says_why_it_cannot_fill_the_frame_subtasks(kit):
    scenes = kit.SCENES[:3]
    items = [i for i in kit.make_candidates(scenes) if i.subtask in ("abs_distance", "object_size")]
    quotas = {"abs_distance": 0.4, "object_size": 0.4, "camera_distance": 0.2}
    _, rep = sample(items, kit.make_config(total=30, quotas=quotas, splits={"train": 1.0}), seed=0)
    explain_shortfalls(rep, BOX_ONLY_DROPS)
    line = _short_line(rep, "camera_distance")
    assert line.startswith("subtask camera_distance: quota 6 not met, selected 0 (6 short): only 0 candidates")
    assert line.endswith("; generation dropped source_has_no_frames in 3 scenes")
    assert not [w for w in rep.warnings if w.startswith("subtask abs_distance: quota")]  # met: no line


def test_a_source_of_evaluation_scenes_says_so(kit):
    scenes = kit.SCENES[:1] + [("scannetpp", "09c1414f1b")]  # the second is a VSI-Bench evaluation scene
    items = [i for i in kit.make_candidates(scenes) if i.subtask == "object_size"]
    quotas = {"object_size": 0.5, "object_count": 0.5}
    _, rep = sample(items, kit.make_config(total=40, quotas=quotas, splits={"train": 1.0}), seed=0)
    explain_shortfalls(rep, [])
    for name in ("object_size", "object_count"):
        line = _short_line(rep, name)
        assert line.endswith("; excluded as VSI-Bench evaluation scenes (scannetpp: 1 scenes / 12 candidates)"), line


def test_a_build_of_evaluation_scenes_alone_says_why_in_its_error(kit):
    """Real boxes of VSI-Bench's evaluation scenes: nothing can be selected, and the build's error says
    so in one line (the scenes excluded, the frame subtasks a box-only source cannot ask) instead of
    pointing at the report file alone."""
    import pytest

    from numerical3d.pipeline import build as b
    from numerical3d.pipeline.build.assemble import IncompleteBuild, require_complete
    from numerical3d.pipeline.shortfall import headline

    items = [i for i in kit.make_candidates([("scannetpp", "09c1414f1b")]) if i.subtask != "camera_distance"]
    quotas = {"object_size": 0.5, "camera_distance": 0.5}
    _, rep = sample(items, kit.make_config(total=40, quotas=quotas, splits={"train": 1.0}), seed=0)
    report = rep.to_dict()
    line = headline(report, BOX_ONLY_DROPS)
    assert line.startswith("selected 0 of 40 items; excluded as VSI-Bench evaluation scenes: scannetpp 1 scenes / ")
    assert "1 subtasks need frames the sources do not have (camera_distance); short of quota: object_size 0/20" in line
    summary = b.BuildSummary(out="ds", work="ds.work", scenes={"done": 1}, quarantine=[], items_per_source_subtask={},
                             drops=BOX_ONLY_DROPS, dropped=[], candidates=len(items), selected=0, card=None,
                             manifest=None, sampling_report=report)
    with pytest.raises(IncompleteBuild, match="selected 0 items, so nothing was written to ds; selected 0 of 40 items; "
                                              "excluded as VSI-Bench evaluation scenes: scannetpp 1 scenes"):
        require_complete(summary, allow_partial=True)
    met = {**report, "total_selected": 40, "subtasks": {"object_size": {"quota": 20, "selected": 40}}}
    assert headline(met, []) is None
