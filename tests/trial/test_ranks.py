"""A data-parallel trial's ranks (autotune.trial.ranks), on the CPU with gloo: two real ranks in a real trial
process, the global throughput and the slowest rank, and a rank that dies failing the trial with nothing left."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from autotune.measurement import Status, TrialResult
from autotune.trial.ranks import RankEnd, combined
from autotune.trial.trialspec import MeasureSettings, TrialSpec
from autotune.trial_process import TrialRunner
from autotune.views.text import trial_summary

FAST = MeasureSettings(min_warmup_steps=2, max_warmup_steps=6, settle_window=2, min_steps=5, min_time_s=0.2)


@pytest.fixture(scope="module")
def runner() -> TrialRunner:
    return TrialRunner(compiles=False)


def _alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie, dead but not yet reaped, counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def _dying_spec(tmp_path: Path, how: str) -> TrialSpec:
    args = {"rank": 1, "how": how, "pids": str(tmp_path)}
    params = {"data_parallel": "ddp"}
    return TrialSpec("trial_workloads:rank_dies", params, "tiny", "cpu", args, FAST, gpus_per_trial=2)


def test_ddp_trial_of_two_ranks_reports_global_throughput_and_the_slowest(runner: TrialRunner) -> None:
    params = {"data_parallel": "ddp", "ddp_bucket_cap_mb": 5, "ddp_static_graph": True, "batch_size": 2}
    spec = TrialSpec("gpt2", params, "tiny", "cpu", measure=FAST, gpus_per_trial=2)
    result = runner.run(spec, timeout_s=120)
    assert result.status == Status.OK, result.reason
    metrics = result.metrics
    assert metrics["world_size"] == 2
    assert metrics["throughput"] == pytest.approx(2 * metrics["rank_throughput"])
    assert metrics["rank_throughput"] == min(result.extra["rank_throughput"])
    assert metrics["slowest_rank"] in (0, 1)
    assert metrics["slowest_rank_step_ms"] == result.extra["rank_step_ms"][metrics["slowest_rank"]]
    assert len(result.extra["rank_step_ms"]) == 2
    assert result.params["data_parallel"] == "ddp" and result.params["ddp_bucket_cap_mb"] == 5
    said = f"ranks        2, together (slowest rank {metrics['slowest_rank']} at"
    assert said in trial_summary("gpt2", "tiny", result)


def test_fsdp_trial_of_two_ranks_shards_and_measures(runner: TrialRunner) -> None:
    params = {"data_parallel": "fsdp", "fsdp_reshard_after_forward": False, "batch_size": 2}
    result = runner.run(TrialSpec("gpt2", params, "tiny", "cpu", measure=FAST, gpus_per_trial=2), timeout_s=120)
    assert result.status == Status.OK, result.reason
    assert result.metrics["world_size"] == 2 and len(result.extra["rank_throughput"]) == 2


DEATHS = [("kill", "rank 1 of 2 killed by signal SIGKILL"), ("raise", "rank 1 of 2: ")]


@pytest.mark.parametrize(("how", "said"), DEATHS)
def test_a_rank_that_dies_fails_the_trial_naming_it_and_leaves_no_process(
    runner: TrialRunner, tmp_path: Path, how: str, said: str
) -> None:
    result = runner.run(_dying_spec(tmp_path, how), timeout_s=120)
    assert result.status == Status.CRASH
    assert result.reason is not None and said in result.reason and "\n" not in result.reason
    if how == "raise":
        assert "fails on purpose" in result.reason
    pids = [int(path.read_text()) for path in sorted(tmp_path.glob("rank*.pid"))]
    assert len(pids) == 2 and os.getpid() not in pids
    assert not any(_alive(pid) for pid in pids)


def test_the_first_failure_of_the_ranks_is_the_trials_reason() -> None:
    ok = TrialResult(Status.OK, None, {}, {"throughput": 10.0, "step_ms_p50": 1.0})
    consequence = TrialResult.failed(Status.CRASH, "Connection closed by peer", {})
    cause = TrialResult.failed(Status.OOM, "out of memory", {})
    result = combined([RankEnd(0, consequence, 2.0), RankEnd(1, cause, 1.0)], {})
    assert (result.status, result.reason) == (Status.OOM, "rank 1 of 2: out of memory")
    silent = combined([RankEnd(0, ok, 1.0), RankEnd(1, None, 2.0)], {})
    assert silent.status == Status.TIMEOUT and silent.reason is not None and "rank 1 of 2" in silent.reason
