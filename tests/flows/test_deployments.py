"""prefect.yaml and the train hand-off command, without a server."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from .conftest import REPO


def test_prefect_yaml_deployments_point_at_real_flows_with_valid_parameters():
    from prefect.flows import load_flow_from_entrypoint

    spec = yaml.safe_load((REPO / "prefect.yaml").read_text())
    deployments = {d["name"]: d for d in spec["deployments"]}
    assert set(deployments) == {"build", "publish", "train"}
    for name, d in deployments.items():
        assert d["work_pool"]["name"] == "numerical3d"
        path, func = d["entrypoint"].split(":")
        flow = load_flow_from_entrypoint(f"{REPO / path}:{func}")
        known = set(flow.parameters.properties)
        assert set(d.get("parameters", {})) <= known, (name, set(d["parameters"]) - known)
    pool = spec["definitions"]["work_pool"]
    assert pool["job_variables"]["env"]["PREFECT_SERVER_ANALYTICS_ENABLED"] == "false"


def test_serve_deployments_match_prefect_yaml():
    from numerical3d import flows

    served = {d.name: d for d in flows.deployments()}
    assert set(served) == {"build", "publish", "train"}
    assert served["build"].parameters == {"preset": "demo", "out": "numerical3d-demo"}


def test_train_command_wraps_numerical3d_train_in_accelerate():
    from numerical3d import flows

    cmd = flows.train_command("/data/ds", "qwen2.5-vl-7b", "/runs/a", num_processes=8, extra_args=["--max-steps", "2"])
    assert cmd[:3] == [sys.executable, "-m", "accelerate.commands.launch"]
    assert cmd[cmd.index("--num_processes") + 1] == "8"
    # The same accelerate config as the documented command: the 7B's ZeRO-3 recipe, a bundled file.
    config_file = Path(cmd[cmd.index("--config_file") + 1])
    assert config_file.is_file() and config_file.name == "zero3.yaml"
    assert "distributed_type: DEEPSPEED" in config_file.read_text()
    tail = cmd[cmd.index("--no_python") + 1:]
    assert tail == ["numerical3d", "train", "--config", "qwen2.5-vl-7b", "--dataset", "/data/ds", "--output", "/runs/a",
                    "--max-steps", "2"]
    three = flows.train_command("/d", "qwen2.5-vl-3b", "o", num_processes=8)
    assert Path(three[three.index("--config_file") + 1]).name == "zero2.yaml"
    chosen = flows.train_command("/d", "qwen2.5-vl-3b", "o", num_processes=4, accelerate_config="zero3_4gpu")
    assert Path(chosen[chosen.index("--config_file") + 1]).name == "zero3_4gpu.yaml"
    single = flows.train_command("/d", "c", "o")
    assert "--num_machines" in single and "--mixed_precision" in single and "--config_file" not in single
    # The flags exist in the installed accelerate.
    helptext = subprocess.run([sys.executable, "-m", "accelerate.commands.launch", "--help"],
                              capture_output=True, text=True, check=True).stdout
    for flag in ("--no_python", "--num_processes", "--num_machines", "--mixed_precision", "--dynamo_backend"):
        assert flag in helptext
