"""``python -m autotune.trial.firststeps``, the production start the sweep rehearses: bad input is one line and exit
code 2 (the stage keeps that line as the rehearsal's reason); a good config prints one JSON line of what it took."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from pythonpath import child_env


def start(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "autotune.trial.firststeps", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=300, env=child_env())


@pytest.mark.parametrize(
    ("config", "fragment"),
    [
        (None, "not found"),
        ({"schema_version": 1, "knobs": {"compile_mode": "none"}}, "names no workload to start"),
        (
            {"schema_version": 1, "knobs": {"compile_mode": "none"}, "workload": {"name": "no_such_module:fn"}},
            "no_such_module",
        ),
    ],
    ids=["missing", "no-workload", "unknown-workload"],
)
def test_bad_input_is_one_line_and_exit_code_2(tmp_path: Path, config: dict[str, object] | None, fragment: str) -> None:
    tuned = tmp_path / "tuned.yaml"
    if config is not None:
        tuned.write_text(yaml.safe_dump(config))
    proc = start(str(tuned), "--device", "cpu")
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert lines[0].startswith("autotune: error: ") and fragment in lines[0], lines


@pytest.mark.parametrize(
    "name", ["trial_workloads:tiny_mlp", "data.data_workloads:host_mlp"], ids=["make-batch", "dataset"]
)
def test_a_start_prints_what_it_took(tmp_path: Path, name: str) -> None:
    tuned = tmp_path / "tuned.yaml"
    workload = {"name": name, "preset": "tiny"}
    knobs = {"compile_mode": "none", "batch_size": 8}
    tuned.write_text(yaml.safe_dump({"schema_version": 1, "knobs": knobs, "workload": workload}))
    proc = start(str(tuned), "--device", "cpu", "--steps", "2", "--steady", "3")
    assert proc.returncode == 0, proc.stderr
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(found["step_s"]) == 2 and found["steady_step_ms"] > 0 and found["device"] == "cpu"
    rounding = 0.0005 * len(found["step_s"])  # each step's time is printed to the millisecond
    assert found["first_steps_s"] >= sum(found["step_s"]) - rounding and 0 <= found["start_s"] <= found["first_steps_s"]
    assert found["artifacts_loaded"] is None and found["saved"] is None  # eager: nothing to load, nothing asked saved


@pytest.mark.parametrize(
    ("config", "extra", "fragment"),
    [
        ({"knobs": {"compile_mode": "none"}}, ["--steady", "0"], "--steps and --steady must be at least 1"),
        (
            {"knobs": {"compile_mode": "none"}, "params": {"no_such_param": 3}},
            [],
            "'trial_workloads:tiny_mlp' cannot be built with",
        ),
    ],
    ids=["no-steady-steps", "param-the-workload-lacks"],
)
def test_a_config_the_workload_cannot_start_is_one_line(
    tmp_path: Path, config: dict[str, object], extra: list[str], fragment: str
) -> None:
    tuned = tmp_path / "tuned.yaml"
    workload = {"name": "trial_workloads:tiny_mlp", "preset": "tiny"}
    tuned.write_text(yaml.safe_dump({"schema_version": 1, "workload": workload, **config}))
    proc = start(str(tuned), "--device", "cpu", *extra)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert fragment in lines[0], lines
