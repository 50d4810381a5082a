"""The command line as a user types it: real processes, real exit codes, one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

TESTS = Path(__file__).parent
REPO = TESTS.parent


def autotune(*args: str, cwd: Path = REPO, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "autotune", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout
    )


def autotune_side_by_side(commands: dict[str, list[str]]) -> dict[str, subprocess.CompletedProcess[str]]:
    """Each command's ``autotune`` process, a few at a time: each spends its second or two importing torch
    on one core, so the cores of a CI machine run them side by side."""
    with ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1)) as pool:
        done = {key: pool.submit(autotune, *args) for key, args in commands.items()}
        return {key: future.result() for key, future in done.items()}


def assert_one_line_error(proc: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("autotune: error: "), proc.stderr
    for fragment in fragments:
        assert fragment in lines[0]


@pytest.mark.slow
def test_trial_json_gpt2_tiny_bf16_on_cpu() -> None:
    proc = autotune("trial", "gpt2", "--preset", "tiny", "--device", "cpu", "-p", "precision=bf16", "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["status"] == "ok" and result["reason"] is None
    assert result["params"]["precision"] == "bf16"
    assert result["metrics"]["throughput"] > 0 and result["metrics"]["throughput_unit"] == "tokens/s"
    assert result["env"]["torch"] and result["env"]["device"] == "cpu"


def test_failed_trial_has_its_own_exit_code() -> None:
    proc = autotune("trial", "trial_workloads:nan_loss", "--device", "cpu", cwd=TESTS)
    assert proc.returncode == 3
    assert "numerics" in proc.stdout and "Traceback" not in proc.stderr


BAD_TRIAL_INPUT = [
    (["-p", "precsion=bf16"], ["unknown parameter 'precsion'"]),
    (["-p", "precision=bf17"], ["precision='bf17'", "bf16"]),
    (["-p", "batch_size"], ["not key=value"]),
    (["--preset", "huge"], ["preset 'huge'"]),
    (["--timeout", "5x"], ["--timeout", "5x"]),
    (["--device", "tpu"], ["device 'tpu'"]),
    (["--no-such-flag"], ["no-such-flag"]),
]


@pytest.fixture(scope="module")
def bad_trials() -> dict[str, subprocess.CompletedProcess[str]]:
    """``autotune trial gpt2 --device cpu ARGS`` for every case of BAD_TRIAL_INPUT, keyed by its args."""
    return autotune_side_by_side(
        {" ".join(args): ["trial", "gpt2", "--device", "cpu", *args] for args, _ in BAD_TRIAL_INPUT}
    )


@pytest.mark.parametrize(("args", "fragments"), BAD_TRIAL_INPUT)
def test_bad_trial_input_is_one_line_and_exit_2(
    bad_trials: dict[str, subprocess.CompletedProcess[str]], args: list[str], fragments: list[str]
) -> None:
    assert_one_line_error(bad_trials[" ".join(args)], *fragments)


def test_unknown_workload_is_bad_input() -> None:
    assert_one_line_error(autotune("trial", "no_such_module:build"), "cannot import 'no_such_module'")


def test_validate_names_every_mistake_with_its_key_path(tmp_path: Path) -> None:
    space = tmp_path / "broken.yaml"
    space.write_text(
        "workload: {name: resnet50, preset: tiny}\n"
        "device: cpu\n"
        "budget: {trails: 5}\n"  # a typo
        "params:\n"
        "  precision: [bf16, bf17]\n"  # not a precision
        "  batch_size: {low: 8, high: 4}\n"  # an empty range
    )
    quick = REPO / "search_spaces" / "quick.yaml"
    proc = autotune("validate", str(space), str(quick))  # a good file beside it: still checked, and said ok
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stdout.splitlines() == [f"{quick}: ok (3 params, sampler tpe)"]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 3 and all(line.startswith(f"autotune: error: {space}: ") for line in lines), proc.stderr
    assert any("budget.trails" in line for line in lines)
    assert any("params.precision" in line and "bf17" in line for line in lines)
    assert any("params.batch_size" in line for line in lines)


def test_validate_accepts_every_shipped_space() -> None:
    spaces = sorted((REPO / "search_spaces").glob("*.yaml"))
    assert spaces
    proc = autotune("validate", *map(str, spaces))  # one process: torch and the workloads imported once
    assert proc.returncode == 0, proc.stderr
    said = proc.stdout.splitlines()
    assert len(said) == len(spaces)
    assert all(line.startswith(f"{space}: ok (") for line, space in zip(said, spaces, strict=True))


# autotune's command line in a Python where torchao cannot be imported, as on a machine without the fp8 extra.
WITHOUT_TORCHAO = (
    "import sys; sys.modules['torchao'] = None; from autotune.cli import main; sys.exit(main(sys.argv[1:]))"
)


def test_a_float8_space_without_torchao_is_one_line_for_validate_and_sweep(tmp_path: Path) -> None:
    space = tmp_path / "fp8.yaml"
    space.write_text(
        'workload: {name: "trial_workloads:wide_mlp", preset: tiny}\n'
        "device: cpu\n"
        "budget: {trials: 2}\n"
        "params:\n"
        "  precision: bf16\n"
        "  float8: [none, tensorwise]\n"
    )
    db = tmp_path / "a.db"
    commands = {
        "validate": ["validate", str(space)],
        "sweep": ["sweep", str(space), "--storage", f"sqlite:///{db}", "--no-mlflow"],
    }
    for command, args in commands.items():
        proc = subprocess.run(
            [sys.executable, "-c", WITHOUT_TORCHAO, *args], cwd=TESTS, capture_output=True, text=True, timeout=300
        )
        assert_one_line_error(proc, f"{space}: params.float8: float8 needs torchao", "pip install 'autotune[fp8]'")
        assert proc.stdout == "", command
    assert not db.exists()  # refused before the study opens
    assert autotune("validate", str(space), cwd=TESTS).returncode == 0  # torchao here: the same space is fine


def test_leaderboard_of_a_missing_study_is_bad_input(tmp_path: Path) -> None:
    proc = autotune("leaderboard", "--study", "nope", "--storage", f"sqlite:///{tmp_path}/a.db")
    assert_one_line_error(proc, "no study 'nope'")


@pytest.mark.slow
def test_a_view_given_no_study_reads_the_storage_only_one(tmp_path: Path) -> None:
    storage = f"sqlite:///{tmp_path}/a.db"
    assert_one_line_error(autotune("status", "--storage", storage), "no study in", "run autotune sweep first")
    replayed = ["--replay", "scripts/data/gpt2_h100_modelled.json", "--n-trials", "2", "--no-mlflow"]
    sweep = autotune("sweep", "search_spaces/gpt2.yaml", *replayed, "--storage", storage)
    assert sweep.returncode == 0, sweep.stderr
    status = autotune("status", "--storage", storage)
    assert status.returncode == 0, status.stderr
    assert status.stdout.startswith("study gpt2-replay (gpt2): 2 of 2 measured"), status.stdout
    again = autotune("sweep", "search_spaces/gpt2.yaml", *replayed, "--storage", storage, "--study", "again")
    assert again.returncode == 0, again.stderr
    assert_one_line_error(
        autotune("leaderboard", "--storage", storage), "name one with --study", "(again, gpt2-replay)"
    )
