#!/usr/bin/env bash
# The shortest real GPU run of the training path: the tiny Qwen2.5-VL on CUDA, bf16, DeepSpeed ZeRO-2
# on one GPU, two AP-GRPO steps of the 3B paper recipe (its rewards, advantage, KL, precision and
# the memory preflight); ZeRO-3 on two GPUs when two are visible; then one vLLM colocate step with
# the bundled colocate recipe's vLLM settings (max model length, importance sampling, sleep mode)
# if vllm is installed.
#
#   bash benchmarks/gpu_smoke.sh [OUT]        # OUT defaults to runs/gpu-smoke; needs a CUDA GPU and
#                                             # pip install -e ".[train,deepspeed]" (vllm optional)
#
# Memory is this run's own peak from torch's allocator (`gpu/peak_allocated_mib` in the run's
# log history, rank 0), not nvidia-smi's card total, which counts every process on the GPU; the
# card's sampled total is printed beside it for context.
#
# Expected output (times and memory vary by GPU; every other line as shown):
#   gpu-smoke: building the tiny dataset and model on CPU ...
#   gpu-smoke: zero2: ok, 2 step(s), <s> s/step, peak <MiB> MiB allocated by the run (<MiB> on the card), ap/k ...
#   gpu-smoke: zero3 on 2 GPUs: ok, ...                  (or: zero3 on 2 GPUs: skipped (1 GPU visible))
#   gpu-smoke: vllm colocate: ok, 1 step(s), ...         (or: vllm colocate: skipped (vllm not installed))
#   gpu-smoke: done
# and exit status 0. Any failed check prints "gpu-smoke: FAILED: <why>" and exits 1.
set -euo pipefail

OUT=$(realpath -m "${1:-runs/gpu-smoke}")
mkdir -p "$OUT"
fail() { echo "gpu-smoke: FAILED: $*"; exit 1; }
python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" || fail "no CUDA GPU visible"
python3 -c "import deepspeed" 2>/dev/null || fail "deepspeed is not installed (pip install -e \".[deepspeed]\")"

echo "gpu-smoke: building the tiny dataset and model on CPU ..."
CUDA_VISIBLE_DEVICES="" numerical3d train --config qwen2.5-vl-3b --preset tiny-cpu --output "$OUT/cpu" --max-steps 1 \
    --skip-plan > "$OUT/cpu.log" 2>&1 || fail "tiny-cpu build (see $OUT/cpu.log)"

BASE=$(python3 -c "from numerical3d.training.config import CONFIG_DIR; print(CONFIG_DIR / 'qwen2.5-vl-3b.yaml')")
write_config() {  # $1: file, $2: extra YAML appended under grpo:
    cat > "$1" <<YAML
base: $BASE
name: gpu-smoke
model:
  name_or_path: $OUT/cpu/tiny-model
data:
  max_frames: 2
  max_pixels: 3136
  max_total_pixels: 6272
  max_items: 8
num_generations: 4
per_device_train_batch_size: 4
gradient_accumulation_steps: 1
max_completion_length: 24
max_steps: 2
validation:
  every_steps: 2
  max_items: 8
  batch_size: 8
grpo:
  save_strategy: "no"
  gradient_checkpointing: true
$2
YAML
}
cat > "$OUT/zero2_1gpu.yaml" <<'YAML'
compute_environment: LOCAL_MACHINE
distributed_type: DEEPSPEED
deepspeed_config:
  offload_optimizer_device: none
  offload_param_device: none
  zero3_init_flag: false
  zero_stage: 2
mixed_precision: bf16
machine_rank: 0
num_machines: 1
num_processes: 1
main_training_function: main
rdzv_backend: static
same_network: true
use_cpu: false
YAML
sed -e 's/zero_stage: 2/zero_stage: 3/' -e 's/zero3_init_flag: false/zero3_init_flag: true/' \
    -e 's/num_processes: 1/num_processes: 2/' "$OUT/zero2_1gpu.yaml" > "$OUT/zero3_2gpu.yaml"

run() {  # $1: label, $2: config file, $3: run folder, $4: accelerate file, then extra `numerical3d train` arguments
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 > "$3.mem" &
    local smi=$!
    local start=$SECONDS label=$1 config=$2 folder=$3 launch=$4
    shift 4
    accelerate launch --config_file "$launch" "$(command -v numerical3d)" train --config "$config" \
        --dataset "$OUT/cpu/tiny-dataset" --output "$folder" "$@" > "$folder.log" 2>&1 \
        || { kill "$smi"; fail "$label (see $folder.log)"; }
    kill "$smi"
    python3 - "$label" "$folder" "$((SECONDS - start))" <<'PY' || fail "$label: checks on $folder"
import json, sys
from pathlib import Path
label, out, wall = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
history = json.loads((out / "log_history.json").read_text())
steps = [e for e in history if "ap/k" in e]
assert (out / "final" / "config.json").exists(), "no final model"
assert steps and all(e["ap/k"] > 0 for e in steps), "no AP-GRPO step logged"
runtime = next((e["train_runtime"] for e in history if "train_runtime" in e), wall)
own = [e["gpu/peak_allocated_mib"] for e in history if "gpu/peak_allocated_mib" in e]
assert own, "no gpu/peak_allocated_mib in the log history (training.peak_memory)"
card = max(int(x) for x in Path(f"{out}.mem").read_text().split() if x.strip().isdigit())
print(f"gpu-smoke: {label}: ok, {len(steps)} step(s), {runtime / len(steps):.2f} s/step, peak {max(own):.0f} MiB "
      f"allocated by the run ({card} MiB on the card), ap/k at the last step {steps[-1]['ap/k']:.3g}")
PY
}

write_config "$OUT/gpu_smoke.yaml" ""
run zero2 "$OUT/gpu_smoke.yaml" "$OUT/zero2" "$OUT/zero2_1gpu.yaml"

GPUS=$(python3 -c "import torch; print(torch.cuda.device_count())")
if [ "$GPUS" -ge 2 ]; then
    run "zero3 on 2 GPUs" "$OUT/gpu_smoke.yaml" "$OUT/zero3" "$OUT/zero3_2gpu.yaml"
else
    echo "gpu-smoke: zero3 on 2 GPUs: skipped ($GPUS GPU visible)"
fi

if python3 -c "import vllm" 2>/dev/null; then
    # The colocate recipe's vLLM settings as bundled (the tiny model's share of the card is its own).
    VLLM=$(python3 - <<'PY'
from numerical3d.training.config import CONFIG_DIR, read_mapping
grpo = read_mapping(CONFIG_DIR / "qwen2.5-vl-7b-vllm-colocate.yaml", "training config").get("grpo", {})
for key, value in sorted(grpo.items()):
    if key.startswith("vllm_") or key == "use_vllm":
        print(f"  {key}: {'null' if value is None else str(value).lower() if isinstance(value, bool) else value}")
PY
) || fail "reading the colocate recipe's vLLM settings"
    write_config "$OUT/gpu_smoke_vllm.yaml" "$VLLM"
    grep -q "vllm_max_model_length" "$OUT/gpu_smoke_vllm.yaml" || fail "the colocate recipe sets no vllm_max_model_length"
    run "vllm colocate" "$OUT/gpu_smoke_vllm.yaml" "$OUT/vllm" "$OUT/zero2_1gpu.yaml" --max-steps 1
else
    echo "gpu-smoke: vllm colocate: skipped (vllm not installed)"
fi
echo "gpu-smoke: done"
