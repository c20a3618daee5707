"""prefect.yaml and the train hand-off command, without a server."""

from __future__ import annotations

import subprocess
import sys

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

    cmd = flows.train_command("/data/ds", "cfg.yaml", "/runs/a", num_processes=4, extra_args=["--max-steps", "2"])
    assert cmd[:3] == [sys.executable, "-m", "accelerate.commands.launch"]
    assert cmd[cmd.index("--num_processes") + 1] == "4"
    tail = cmd[cmd.index("--no_python") + 1:]
    assert tail == ["numerical3d", "train", "--config", "cfg.yaml", "--dataset", "/data/ds", "--output", "/runs/a",
                    "--max-steps", "2"]
    single = flows.train_command("/d", "c", "o")
    assert "--num_machines" in single and "--mixed_precision" in single
    # The flags exist in the installed accelerate.
    helptext = subprocess.run([sys.executable, "-m", "accelerate.commands.launch", "--help"],
                              capture_output=True, text=True, check=True).stdout
    for flag in ("--no_python", "--num_processes", "--num_machines", "--mixed_precision", "--dynamo_backend"):
        assert flag in helptext
