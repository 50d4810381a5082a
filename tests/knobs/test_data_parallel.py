"""The data-parallel knobs (autotune.knobs.data_parallel): refused without torch.distributed and in pairings that
cannot run, in a trial and in a space; and production's ``cfg.apply()`` in a torchrun-style launch of two gloo
processes wrapping the model as a trial's ranks do (DDP with the tuned settings, FSDP2 block by block)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from pythonpath import child_env

from autotune.errors import InvalidCombination
from autotune.knobs.applying import apply
from autotune.knobs.registry import Knobs
from autotune.space import SpaceError, load_space

HERE = Path(__file__).parent
TESTS = HERE.parent
RANK_SCRIPT = HERE / "torchrun_rank.py"
SPACE = """\
workload: {name: gpt2, preset: tiny}
device: cpu
budget: {trials: 2}
"""


def test_data_parallel_without_torch_distributed_is_an_invalid_combination() -> None:
    knobs = Knobs.from_params({"data_parallel": "ddp"})
    with pytest.raises(InvalidCombination, match=r"data_parallel=ddp needs torch\.distributed initialised with 2"):
        knobs.check_combination("cpu")
    with pytest.raises(InvalidCombination, match="gpus_per_trial"):
        apply(torch.nn.Linear(4, 4), None, knobs, "cpu")


@pytest.mark.parametrize(
    ("params", "said"),
    [
        ({"data_parallel": "fsdp", "ddp_bucket_cap_mb": 100}, "ddp_bucket_cap_mb=100 acts on data_parallel=ddp only"),
        ({"data_parallel": "ddp", "fsdp_reshard_after_forward": False}, "acts on data_parallel=fsdp only, not ddp"),
        ({"ddp_static_graph": True}, "ddp_static_graph=true acts on data_parallel=ddp only, not none"),
    ],
)
def test_a_wrappers_setting_with_another_wrapper_is_an_invalid_combination(params: dict[str, Any], said: str) -> None:
    with pytest.raises(InvalidCombination, match=said):
        Knobs.from_params(params).check_combination("cpu", processes=2)
    Knobs.from_params({**params, "data_parallel": "ddp" if "ddp_" in said else "fsdp"}).check_combination("cpu", 2)


def test_validate_reports_a_wrapper_in_one_process_and_settings_that_meet_the_other_wrapper(tmp_path: Path) -> None:
    space = tmp_path / "space.yaml"
    space.write_text(
        SPACE
        + "params:\n  data_parallel: [none, ddp, fsdp]\n  ddp_bucket_cap_mb: [25, 100]\n"
        + "  fsdp_reshard_after_forward: {choices: [true, false], when: {data_parallel: [fsdp]}}\n"
    )
    with pytest.raises(SpaceError) as raised:
        load_space(space)
    said = str(raised.value)
    assert "params.data_parallel: ddp needs more than one process per trial" in said
    assert "params.ddp_bucket_cap_mb: acts on data_parallel=ddp only" in said
    assert "fsdp_reshard_after_forward" not in said


def test_validate_takes_gpus_per_trial_and_wrapper_settings_behind_their_wrapper(tmp_path: Path) -> None:
    space = tmp_path / "space.yaml"
    space.write_text(
        SPACE
        + "gpus_per_trial: 2\nparams:\n  data_parallel: [ddp, fsdp]\n"
        + "  ddp_bucket_cap_mb: {choices: [25, 100], when: {data_parallel: [ddp]}}\n"
    )
    assert load_space(space).gpus_per_trial == 2
    space.write_text(SPACE + "gpus_per_trial: 0\nparams:\n  data_parallel: [none]\n")
    with pytest.raises(SpaceError, match="gpus_per_trial: 0 is not a whole number >= 1"):
        load_space(space)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _torchrun(knobs: dict[str, Any], world: int = 2) -> list[dict[str, Any]]:
    """``world`` processes of :data:`RANK_SCRIPT` with the environment torchrun gives its ranks; each one's report."""
    rendezvous = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port()), "WORLD_SIZE": str(world)}
    ranks = [
        subprocess.Popen(
            [sys.executable, str(RANK_SCRIPT), json.dumps(knobs)],
            env=child_env(TESTS, **rendezvous, RANK=str(rank), LOCAL_RANK=str(rank), OMP_NUM_THREADS="1"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in range(world)
    ]
    reports = []
    try:
        for rank in ranks:
            out, err = rank.communicate(timeout=90)
            assert rank.returncode == 0, err[-2000:]
            reports.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for rank in ranks:
            rank.kill()
            rank.wait()
    return reports


@pytest.mark.slow
def test_apply_under_torchrun_wraps_the_model_in_ddp_with_the_tuned_settings() -> None:
    # The knobs of the DDP trial in tests/trial/test_ranks.py, as its tuned config would carry them.
    knobs = {"data_parallel": "ddp", "ddp_bucket_cap_mb": 5, "ddp_static_graph": True}
    reports = _torchrun({**knobs, "ddp_gradient_as_bucket_view": True})
    for rank, report in enumerate(reports):
        assert report["rank"] == rank
        assert report["wrapper"] == "ddp"
        assert report["bucket_cap_mb"] == 5
        assert report["gradient_as_bucket_view"] is True and report["static_graph"] is True
    assert reports[0]["loss"] == pytest.approx(reports[1]["loss"])  # one model, its gradients shared


def test_apply_under_torchrun_shards_the_model_with_fsdp2_block_by_block() -> None:
    reports = _torchrun({"data_parallel": "fsdp", "fsdp_reshard_after_forward": False})
    for report in reports:
        assert report["wrapper"] == "fsdp"
        assert report["units"] == 1 + 2  # the root and the tiny GPT-2's two blocks
        assert report["sharded"] is True and report["optimizer_sharded"] is True
