"""The dataset card and plots; the `assemble` command end to end from an items JSONL."""

from __future__ import annotations

import json

import yaml
from markdown_it import MarkdownIt


def test_card_has_the_required_sections(built):
    text = (built.dir / "README.md").read_text()
    header = yaml.safe_load(text.split("---\n")[1])
    assert [c["config_name"] for c in header["configs"]] == ["default", "frames"]
    train = next(f for f in header["configs"][0]["data_files"] if f["split"] == "train")
    assert train["path"] == sorted(f for f in built.manifest["files"] if f.startswith("data/train-"))
    counts = built.manifest["counts"]["subtasks"]
    for name, n in counts.items():
        assert f"| `{name}` |" in text and f"| {n} |" in text
    for needle in ("## Source mix", "## Example questions", "## Verifier specs", "SNRA", "AP-GRPO",
                   "## Licences", "may not be redistributed", "## Decontamination", "288 scenes",
                   "load_dataset(", "prompt_dataset(", "plots/answer_distributions.png", "plots/snra_schedule.png"):
        assert needle in text, needle
    for plot in ("plots/answer_distributions.png", "plots/snra_schedule.png"):
        assert (built.dir / plot).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_card_reports_planted_exclusion(tmp_path, kit):
    from numerical3d.pipeline.sampling import sample
    from numerical3d.pipeline.writer import write_dataset

    cfg = kit.make_config(media={"mode": "reference"})
    sel, rep = sample(kit.make_candidates(kit.SCENES + [("arkitscenes", "41069025")]), cfg, seed=0)
    write_dataset(sel, None, tmp_path, cfg, report=rep)
    text = (tmp_path / "README.md").read_text()
    assert "| arkitscenes | 1 | 84 |" in text
    assert "numerical3d hydrate" in text  # reference mode tells users how to get the pixels
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["sampling"]["excluded"]["scene_ids"] == {"arkitscenes": ["41069025"]}


def test_cli_assemble_from_items_jsonl(tmp_path, kit):
    from typer.testing import CliRunner

    from numerical3d.pipeline.cli import app

    items = kit.make_candidates(kit.SCENES + [("scannet", "scene0025_01")], per_scene=3)
    path = tmp_path / "items.jsonl"
    path.write_text("".join(json.dumps(i.to_dict()) + "\n" for i in items))
    out = tmp_path / "ds"
    args = ["assemble", str(path), "--out", str(out), "--config", "demo", "--total", "40", "--media", "reference", "--seed", "3"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    assert "scannet: 1 scenes" in res.output  # the exclusion is reported
    manifest = json.loads((out / "manifest.json").read_text())
    assert sum(manifest["counts"]["items"].values()) == 40 and manifest["seed"] == 3
    res = CliRunner().invoke(app, ["assemble", str(path), "--out", str(tmp_path / "e"), "--config", "demo"])
    assert res.exit_code != 0 and "--source-root" in res.output


def test_card_lists_every_verifier_kind_quarantined_scenes_and_readable_labels(tmp_path, kit):
    """A subtask answered with two kinds lists both; quarantined scenes reach card and manifest; list
    answers are labelled "1 relation" / "none" / "3 labels in order", never "1 labels"."""
    import dataclasses

    from numerical3d.pipeline.card import DatasetStats, answer_size
    from numerical3d.pipeline.sampling import sample
    from numerical3d.pipeline.writer import write_dataset

    cfg = kit.make_config(media={"mode": "reference"})
    selection, _ = sample(kit.make_candidates(kit.SCENES), cfg, seed=0)
    sel = list(selection)
    choice = next(i for i in sel if i.verifier["kind"] == "choice")
    # The same subtask answered as an order too (appearance_order is `choice` and `order` in real builds).
    sel.append(dataclasses.replace(choice, id=choice.id + "o", verifier=kit.make_spec("order", ["a", "b", "c"])))
    quarantine = [{"source": "scannet", "scene_id": "scene0099_00", "status": "quarantined",
                   "reason": "scene0099_00.txt: no axisAlignment | not gravity aligned"}]
    manifest = write_dataset(sel, None, tmp_path, cfg, seed=0, quarantine=quarantine)
    text = (tmp_path / "README.md").read_text()
    assert manifest["quarantine"] == quarantine
    assert "## Quarantined scenes" in text and "| scannet | scene0099\\_00 | quarantined |" in text
    assert "no axisAlignment \\| not gravity aligned" in text  # a | in a reason does not break the table
    html = MarkdownIt("commonmark", {"html": True}).enable("table").render(text)
    assert "<td>scene0099_00</td>" in html and "<td>scene0099_00.txt: no axisAlignment | not gravity aligned</td>" in html

    stats = DatasetStats()
    for it in sel:
        stats.observe("train", it)
    assert stats.kind_names(choice.subtask) == ["choice", "order"]
    for subtask in stats.subtasks:
        listed = ", ".join(f"`{k}`" for k in stats.kind_names(subtask))
        assert f"| `{subtask}` |" in text and listed in text
    assert [answer_size("relations", n) for n in (0, 1, 2)] == ["none", "1 relation", "2 relations"]
    assert [answer_size("order", n) for n in (1, 4)] == ["1 label in order", "4 labels in order"]


def test_card_without_quarantine_has_no_quarantine_section(built):
    assert "## Quarantined scenes" not in (built.dir / "README.md").read_text()
    assert built.manifest["quarantine"] == []


def test_card_shows_a_built_question_per_subtask_and_kind_and_only_what_the_build_holds(built):
    """Each (subtask, verifier kind) gets the first built question of its kind: prompt, answer and
    spec exactly as the shards hold them, and how it is graded. The opening sentence names only
    the quantities the build holds, in the card's words ("depth" is none of them)."""
    from numerical3d.pipeline.shards import read_items

    text = (built.dir / "README.md").read_text()
    examples = text.split("## Example questions")[1].split("## Verifier specs")[0]
    order = [it for it in built.selection]
    first: dict[tuple[str, str], object] = {}
    for it in order:
        first.setdefault((it.subtask, it.verifier["kind"]), it)
    on_disk = {it.id: it for it in read_items(built.dir)}
    headings = [h for h in examples.splitlines() if h.startswith("### ")]
    assert headings == [f"### `{s}` ({k})" for s, k in sorted(first)]
    for (subtask, kind), it in first.items():
        block = examples.split(f"### `{subtask}` ({kind})")[1].split("### ")[0]
        stored = on_disk[it.id]  # the example is the built row, not a reconstruction
        assert f"```text\n{stored.prompt}\n```" in block
        assert f"- answer: `{stored.answer}`" in block
        assert f"- spec: `{json.dumps(stored.verifier, sort_keys=True)}`" in block
        assert f"id `{it.id}`" in block
    shown = MarkdownIt("commonmark").render(examples)  # the verifier's words are escaped, and read as written
    assert "V = 1 for" in shown and "Kendall" in shown and "((y_hat - y) / y)^2" in shown
    intro = text.split("## Splits")[0].split("# ")[-1]
    assert "distances between objects, camera-to-object distances, object sizes." in intro
    assert "depth" not in intro.lower() and "floor areas" not in intro  # no room_size among these candidates
    assert "multiple choice" in intro and "partial credit (count, direction, order)" in intro


def test_answer_plots_keep_option_letters_and_classes_apart(kit):
    """A subtask answered both as a letter and as a class (rel_direction) gets two distributions:
    the letters' panel holds letters only, the classes' panel classes only."""
    import dataclasses

    from numerical3d.pipeline.card import DatasetStats

    stats = DatasetStats()
    items = kit.make_candidates(kit.SCENES, per_scene=4)
    direction = next(i for i in items if i.verifier["kind"] == "direction")
    mc = dataclasses.replace(direction, id="mc", verifier=kit.make_spec("choice", "C", options=["left", "right", "back", "front"]))
    for it in [*items, mc]:
        stats.observe("train", it)
    assert ("rel_direction", "choice") in stats.panels() and ("rel_direction", "direction") in stats.panels()
    assert set(stats.classes[("rel_direction", "choice")]) == {"C"}
    assert set(stats.classes[("rel_direction", "direction")]) <= set(direction.verifier["classes"])
    letters = {k for (s, kind), c in stats.classes.items() if kind == "choice" for k in c}
    classes = {k for (s, kind), c in stats.classes.items() if kind == "direction" for k in c}
    assert letters <= set("ABCD") and classes and not classes & letters


def test_box_only_build_card_mentions_no_frames(tmp_path, kit):
    """Items without frames (a box-only source such as vsi-meta): no frames config in the YAML, no
    frames column in the splits table, no hydrate recipe, and the card says there are no images."""
    import dataclasses

    from numerical3d.pipeline.sampling import sample
    from numerical3d.pipeline.writer import write_dataset

    cfg = kit.make_config(media={"mode": "reference"})
    items = [dataclasses.replace(i, frame_indices=[]) for i in kit.make_candidates(kit.SCENES)]
    sel, rep = sample(items, cfg, seed=0)
    write_dataset(sel, None, tmp_path, cfg, report=rep)
    text = (tmp_path / "README.md").read_text()
    header = yaml.safe_load(text.split("---\n")[1])
    assert [c["config_name"] for c in header["configs"]] == ["default"]
    assert "no question comes with frames" in text and "| split | questions |\n" in text
    assert "Frames are published by reference" not in text and '"frames")' not in text


def test_how_verified_reads_the_resolved_spec(kit):
    """The sentence follows the spec's own parameters (defaults filled in by the verifier), and a spec
    the verifier refuses says so instead of describing a grading that cannot happen."""
    from numerical3d.pipeline.card import how_verified

    ring = ["front", "front-right", "right", "back-right", "back", "back-left", "left", "front-left"]
    assert how_verified(kit.make_spec("direction", "front", classes=ring)).endswith("0.5 for a neighbouring class")
    assert how_verified(kit.make_spec("direction", "left", classes=["left", "back", "right"])).endswith("no partial credit")
    assert "max(0, 1 - |n - 3| / (3 + 1))" in how_verified(kit.make_spec("count", 3, form="linear"))
    assert "exp(-|n - 3| / 1)" in how_verified(kit.make_spec("count", 3))
    assert "the empty set (none)" in how_verified(kit.make_spec("relations", []))
    assert how_verified({"kind": "nope", "answer": 1}).startswith("not checkable:")
