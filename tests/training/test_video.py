"""A question's frames as one Qwen2.5-VL video (`data.visual: video`) on the tiny model.

Qwen's video processor needs torchvision, which cannot load beside the CPU torch here, so these
tests give the tiny model's processor `video_double.QwenVideoProcessorStandIn` (same contract,
see its docstring). Everything after the processor is real: the chat template's video part,
Qwen2_5_VLProcessor's token expansion and `second_per_grid_ts`, TRL's generation, the trainer's
log-prob passes and the model's vision tower and 3D rotary positions. Where torchvision works,
`test_stand_in_matches_qwen_video_processor` and `test_real_video_processor_trains` run too.
"""

from __future__ import annotations

import functools
import inspect
import json

import pytest
import torch
from numerical3d import verifiers
from typer.testing import CliRunner

from numerical3d.training.config import ConfigError, DataConfig, config_from_dict
from numerical3d.training.data import FrameBudget, prompt_dataset

from .conftest import TINY, tiny_config
from .video_double import QwenVideoProcessorStandIn, torchvision_works, with_stand_in

pytestmark = [pytest.mark.slow, TINY]
VIDEO = {"visual": "video", "video": {"max_frames": 4, "max_pixels": 56 * 56}}


@pytest.fixture
def stand_in(monkeypatch):
    """Every processor training loads gets the stand-in video processor."""
    from numerical3d.training import tiny

    real = tiny.load_processor
    monkeypatch.setattr(tiny, "load_processor", lambda path: with_stand_in(real(path)))


def _config(model, **over):
    return tiny_config(model, max_steps=2, **{**over, "data": {**VIDEO, **over.get("data", {})}})


def _record(module, name, calls):
    """Wrap `module.name`, keeping its signature (generation reads it), to record each call."""
    original = getattr(module, name)

    signature = inspect.signature(original)

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        calls.append({"grad": torch.is_grad_enabled(), **signature.bind(*args, **kwargs).arguments})
        return original(*args, **kwargs)

    setattr(module, name, wrapper)


def test_video_rows_carry_frames_and_time(built_dataset):
    cfg = DataConfig(split="train", **VIDEO)  # every train item: its first 30 need not hold a 7-frame one
    rows, report = prompt_dataset(str(built_dataset), cfg)
    assert report.kept == len(rows) >= 30
    seen = set()
    for row, item in zip(rows, rows.with_format(None)):
        assert "images" not in row and {"video", "video_metadata", "verifier", "id"} <= set(row)
        parts = row["prompt"][-1]["content"]
        assert [p["type"] for p in parts] == ["video", "text"]
        n = len(item["frames"])
        picked = FrameBudget(4).pick(n)
        assert len(row["video"]) == len(picked) and all(im.width * im.height <= 56 * 56 for im in row["video"])
        assert row["video_metadata"] == {"total_num_frames": n, "fps": n / 60.0, "frames_indices": picked}
        seen.add(n)
    assert {1, 7} <= seen  # frame-level items (one frame) and scene-level ones (7 of the scan's frames)

    text = prompt_dataset(str(built_dataset), cfg.model_copy(update={"frameless": "text"}))[0]
    for row in text.select(range(5)):
        assert row["video"] == [] and row["video_metadata"] is None
        assert [p["type"] for p in row["prompt"][-1]["content"]] == ["text"]


def test_encode_video_prompts_expands_one_pad_per_merged_patch(tiny_model):
    from PIL import Image

    from numerical3d.training.data import conversation
    from numerical3d.training.tiny import load_processor
    from numerical3d.training.video import encode_video_prompts

    processor = with_stand_in(load_processor(tiny_model))
    frames = [Image.new("RGB", (80, 60), (i * 40, 0, 0)) for i in range(4)]
    meta = {"total_num_frames": 16, "fps": 16 / 60.0, "frames_indices": [0, 5, 10, 15]}
    convs = [conversation("How far?", 4, visual="video"), conversation("Count.", 0, visual="video"),
             conversation("Size?", 3, visual="video")]
    enc = encode_video_prompts(processor, convs, [frames, [], frames[:3]],
                               [meta, None, {**meta, "frames_indices": [0, 7, 15]}])
    video_pad = processor.tokenizer.convert_tokens_to_ids("<|video_pad|>")
    assert processor.video_processor.calls[-1] == {"videos": 2, "do_sample_frames": False}
    for ids, types, clip in zip(enc.input_ids, enc.mm_token_type_ids, enc.clips):
        pads = [i for i, t in enumerate(ids) if t == video_pad]
        assert [i for i, t in enumerate(types) if t] == pads and all(types[i] == 2 for i in pads)
        patches = int(clip.video_grid_thw.prod(-1).sum())  # 0 for a prompt without video
        assert len(pads) == patches // 4 and clip.pixel_values_videos.shape[0] == patches
    assert enc.clips[1].video_grid_thw.numel() == 0 and enc.clips[1].pixel_values_videos.shape[0] == 0
    # 4 frames: 2 temporal patches; 3 frames are padded to 4 by repeating the last one. 80 x 60 under
    # 56 x 56 pixels: 56 x 28 by smart_resize, 4 x 2 patches.
    assert enc.clips[0].video_grid_thw.tolist() == [[2, 2, 4]] and enc.clips[2].video_grid_thw.tolist() == [[2, 2, 4]]
    # Qwen's seconds per temporal patch: 2 frames / sampled fps (4 of 16 frames over 60 s).
    assert enc.clips[0].second_per_grid_ts.tolist() == pytest.approx([2 / (4 / 60)])
    assert enc.clips[2].second_per_grid_ts.tolist() == pytest.approx([2 / (3 / 60)])


def test_video_training_feeds_the_vision_tower_in_every_pass(stand_in, tiny_model, built_dataset, tmp_path):
    from numerical3d.training.run import build_trainer

    # subtasks whose items carry 4 frames or more (an item carries only frames showing what it names)
    scene_level = ["room_size", "route_plan"]
    trainer = build_trainer(_config(tiny_model, data={"subtasks": scene_level}), str(built_dataset), tmp_path / "run")
    inner = trainer.model.model
    video_calls, image_calls, rope_calls = [], [], []
    _record(inner, "get_video_features", video_calls)
    _record(inner, "get_image_features", image_calls)
    _record(inner, "get_rope_index", rope_calls)
    vision = {n: p.detach().clone() for n, p in inner.visual.named_parameters()}
    trainer.train()
    assert not image_calls
    generation = [c for c in video_calls if not c["grad"]]
    loss = [c for c in video_calls if c["grad"]]
    assert generation and len(loss) >= 2  # sampling and validation without grad; each step's loss pass with it
    # Temporal rotary positions: the rope index sees the video grid, its time steps and the token types.
    with_video = [c for c in rope_calls if c.get("video_grid_thw") is not None]
    assert with_video and all(c["second_per_grid_ts"] is not None and c["mm_token_type_ids"] is not None
                              for c in with_video)
    assert any(c["grad"] for c in with_video)
    grids = torch.cat([c["video_grid_thw"] for c in loss])
    steps_in_time = set(grids[:, 0].tolist())
    assert 2 in steps_in_time and steps_in_time <= {1, 2}  # 4 of a scene-level item's 7 frames: 2 time patches
    changed = sum(bool((p.detach() != vision[n]).any()) for n, p in inner.visual.named_parameters())
    assert changed > 0  # the loss reached the vision tower through the video features
    assert [e["step"] for e in trainer.state.log_history if "ap/k" in e] == [1, 2]
    assert any("val/accuracy" in e for e in trainer.state.log_history)


def test_video_log_probs_belong_to_their_rows(stand_in, tiny_model, built_dataset, tmp_path):
    """The trainer's chunked log-prob pass gives each sequence its own video: equal to a plain
    forward of that row alone, for any chunk size, and different with another row's video."""
    from numerical3d.training.run import build_trainer
    from numerical3d.training.video import VideoClip

    trainer = build_trainer(_config(tiny_model), str(built_dataset), tmp_path / "run")
    rows, _ = prompt_dataset(str(built_dataset), _config(tiny_model).data.model_copy(update={"max_items": 30}))
    scene_level = [rows[i] for i in range(len(rows)) if len(rows[i]["video"]) > 2]
    batch = [scene_level[0]] * 2 + [scene_level[1]] * 2  # two prompts, two completions each
    out = trainer._generate_and_score_completions(batch)
    clips = out["video_clips"]
    ids = torch.cat([out["prompt_ids"], out["completion_ids"]], dim=1)
    mask = torch.cat([out["prompt_mask"], out["completion_mask"]], dim=1)
    keep = out["completion_ids"].size(1)

    def logps(clip_rows, size):
        trainer._batch_clips = clip_rows
        try:
            with torch.no_grad():
                return trainer._get_per_token_logps_and_entropies(trainer.model, ids, mask, keep, size)[0]
        finally:
            trainer._batch_clips = None

    whole, single = logps(clips, 4), logps(clips, 1)
    torch.testing.assert_close(whole, single, atol=1e-5, rtol=1e-5)
    video_pad = trainer.model.config.video_token_id
    for r in range(4):
        real = mask[r].bool()
        row_ids = ids[r][real].unsqueeze(0)
        types = (row_ids == video_pad).long() * 2
        with torch.no_grad(), trainer.accelerator.autocast():  # the config's bf16 compute, as the pass runs
            logits = trainer.model(input_ids=row_ids, attention_mask=torch.ones_like(row_ids), mm_token_type_ids=types,
                                   pixel_values_videos=clips[r].pixel_values_videos,
                                   video_grid_thw=clips[r].video_grid_thw,
                                   second_per_grid_ts=clips[r].second_per_grid_ts).logits
        n = int(out["completion_mask"][r].sum())
        want = torch.log_softmax(logits[0, -n - 1 : -1].float(), -1).gather(-1, row_ids[0, -n:, None])[:, 0]
        # Under bf16 autocast a left-padded batch (rows whose videos differ in length) and the bare row
        # accumulate in another order: equal to bf16's precision (seen up to 0.5 %), not to fp32's.
        torch.testing.assert_close(whole[r, :n], want, atol=2e-2, rtol=2e-2)
    other = VideoClip(clips[0].pixel_values_videos.flip(0), clips[0].video_grid_thw, clips[0].second_per_grid_ts)
    changed = logps([other, *clips[1:]], 4)
    assert not torch.allclose(changed[0], whole[0])  # another video changes what the policy says of row 0 ...
    torch.testing.assert_close(changed[1:], whole[1:])  # ... and of no other row


def test_cli_eval_with_video(stand_in, tiny_model, built_dataset, tmp_path, monkeypatch):
    """`eval --visual video` answers with the frames as one video, through transformers and through
    the benchmarks' vLLM backend (stood in for: vllm needs CUDA), which gets the video's metadata."""
    from numerical3d.training.benchmarks.backends import VLLMBackend
    from numerical3d.training.cli import app
    from numerical3d.training.data import load_items
    from numerical3d.training.rewards import as_spec

    out = tmp_path / "eval"
    args = ["eval", "--model", str(tiny_model), "--dataset", str(built_dataset), "--max-items", "4",
            "--max-new-tokens", "8", "--visual", "video", "--max-frames", "4", "--max-pixels", "3136", "--json"]
    res = CliRunner().invoke(app, [*args, "--output", str(out)])
    assert res.exit_code == 0, res.output + repr(res.exception)
    report = json.loads((out / "report.json").read_text())
    assert sum(t["n"] for t in report["tasks"].values()) == 4

    specs = {r["id"]: as_spec(r["verifier"]) for r in load_items(str(built_dataset), DataConfig(split="validation"))}
    loaded, seen = [], []

    class Engine:
        def generate(self, prompts):
            seen.extend(prompts)
            return [verifiers.canonical_completion(specs[p.id]) for p in prompts]

    monkeypatch.setattr(VLLMBackend, "load", classmethod(lambda cls, path, **kw: loaded.append(kw) or Engine()))
    res = CliRunner().invoke(app, [*args, "--output", str(tmp_path / "vllm"), "--backend", "vllm"])
    assert res.exit_code == 0, res.output + repr(res.exception)
    assert loaded == [{"visual": "video", "max_new_tokens": 8, "max_images": 4}]
    assert seen and all(p.video_metadata["frames_indices"] == FrameBudget(4).pick(p.video_metadata["total_num_frames"])
                        for p in seen)


def test_video_config_errors(tiny_model, built_dataset, tmp_path):
    with pytest.raises(ConfigError, match="trainer: grpo"):
        config_from_dict({"trainer": "sft", "data": {"visual": "video"}})
    with pytest.raises(ConfigError, match="use_vllm"):
        config_from_dict({"data": {"visual": "video"}, "grpo": {"use_vllm": True}})
    with pytest.raises(ConfigError, match="max_frames"):
        config_from_dict({"data": {"visual": "video", "video": {"max_frames": 0}}})
    if torchvision_works():
        return  # the tiny model's processor has its video part; nothing to refuse
    from numerical3d.cli import app

    res = CliRunner().invoke(app, ["train", "--preset", "tiny-cpu", "--dataset", str(built_dataset), "--model",
                                   str(tiny_model), "--output", str(tmp_path / "run"), "--visual", "video"])
    assert res.exit_code == 2, res.output
    assert "no video processor" in res.output and "torchvision" in res.output and "Traceback" not in res.output


@pytest.mark.skipif(not torchvision_works(), reason="Qwen's video processor needs a torchvision that loads")
def test_stand_in_matches_qwen_video_processor():
    import numpy as np
    from transformers.models.qwen2_vl.video_processing_qwen2_vl import Qwen2VLVideoProcessor

    rng = np.random.default_rng(0)
    video = [rng.integers(0, 255, (60, 80, 3), dtype=np.uint8) for _ in range(3)]
    meta = [{"total_num_frames": 3, "fps": 1.0, "frames_indices": [0, 1, 2]}]
    size = {"shortest_edge": 28 * 28, "longest_edge": 56 * 56}
    real = Qwen2VLVideoProcessor(size=size)(videos=[np.stack(video)], video_metadata=meta, do_sample_frames=False,
                                            return_tensors="pt")
    ours = QwenVideoProcessorStandIn(longest_edge=56 * 56)(videos=[video], video_metadata=meta)
    assert real["video_grid_thw"].tolist() == ours["video_grid_thw"].tolist()
    torch.testing.assert_close(real["pixel_values_videos"], ours["pixel_values_videos"], atol=0.1, rtol=0)


@pytest.mark.skipif(not torchvision_works(), reason="Qwen's video processor needs a torchvision that loads")
def test_real_video_processor_trains(tmp_path, built_dataset):
    from numerical3d.training.cli import app
    from numerical3d.training.tiny import tiny_model_for

    model = tiny_model_for(tmp_path, str(built_dataset), "train")  # saved with Qwen's video processor here
    res = CliRunner().invoke(app, ["train", "--preset", "tiny-cpu", "--dataset", str(built_dataset), "--model",
                                   str(model), "--output", str(tmp_path / "run"), "--visual", "video",
                                   "--max-steps", "1"])
    assert res.exit_code == 0, res.output + repr(res.exception)
    assert json.loads((tmp_path / "run" / "train_config.json").read_text())["data"]["visual"] == "video"
