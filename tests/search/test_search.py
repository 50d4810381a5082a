"""Searching over replayed GPU measurements: determinism, feasibility rules, missing records.

The sweeps here run the real engine (:func:`autotune.sweep.run_sweep`) over the shipped
triton_matmul space and the recorded H200 measurements, in memory, without MLflow.
"""

from __future__ import annotations

import importlib.util
import io
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import optuna
import pytest
from optuna.trial import TrialState
from study_records import measured_records

from autotune.errors import AutotuneError
from autotune.records import TrialKind, schema
from autotune.search.samplers import make_sampler
from autotune.space import Space, load_space
from autotune.sweep import SweepOptions, run_sweep
from autotune.views.progress import Progress

REPO = Path(__file__).resolve().parents[2]
SPACE = REPO / "search_spaces" / "triton_matmul.yaml"
RECORDS = REPO.parent / "shared" / "data" / "h200_triton_matmul_8192.json"

pytestmark = pytest.mark.skipif(not RECORDS.exists(), reason=f"{RECORDS} is not there")


def _benchmark_module() -> ModuleType:
    """scripts/search_benchmark.py, imported by path (scripts/ is not a package)."""
    spec = importlib.util.spec_from_file_location("search_benchmark", REPO / "scripts" / "search_benchmark.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


bench = _benchmark_module()


def _sweep(space: Space, seed: int, n_trials: int | None = None, records: Path = RECORDS) -> optuna.Study:
    """A replay sweep with the space's own sampler; returns its (in-memory) study."""
    kinds = {param.kind for param in space.params.values()}
    catcher = bench.StudyCatcher(make_sampler(space.sampler.name, seed, kinds))
    options = SweepOptions(report=False, storage="memory", replay=records, tracking=False, n_trials=n_trials, seed=seed)
    run_sweep(space, options, progress=Progress(None, None, stream=io.StringIO()), sampler=catcher)
    assert catcher.study is not None
    return catcher.study


def _measured_params(study: optuna.Study) -> list[dict[str, Any]]:
    trials = sorted(measured_records(study), key=lambda t: t.number)
    return [t.params for t in trials]


@pytest.fixture(scope="module")
def space() -> Space:
    return load_space(SPACE, replay=True)


# --- (a) determinism ---------------------------------------------------------------------------


def test_same_seed_same_trials_in_the_same_order(space: Space) -> None:
    first, again = _measured_params(_sweep(space, seed=3)), _measured_params(_sweep(space, seed=3))
    assert len(first) == space.budget.trials == 20
    assert first == again


def test_another_seed_another_order(space: Space) -> None:
    zero, one = _measured_params(_sweep(space, seed=0)), _measured_params(_sweep(space, seed=1))
    assert zero[0] == one[0] == space.default_params()  # the enqueued default comes first either way
    assert zero != one


# --- (b) the feasibility rule -------------------------------------------------------------------


def _records_with_status(status: str) -> list[dict[str, Any]]:
    records = json.loads(RECORDS.read_text())["records"]
    return [r["params"] for r in records if r["status"] == status]


def test_rule_matches_the_out_of_resources_records(space: Space) -> None:
    oom = _records_with_status("out_of_resources")
    assert len(oom) == 24
    assert not any(space.is_feasible(p)[0] for p in oom)
    assert all(space.is_feasible(p)[0] for p in _records_with_status("ok"))


def test_no_oom_configuration_ever_runs(space: Space) -> None:
    study = _sweep(space, seed=0, n_trials=40)
    measured = measured_records(study)
    assert len(measured) == 40
    assert {t.outcome for t in measured} == {"ok"}
    oom = _records_with_status("out_of_resources")
    assert not any(p in oom for p in _measured_params(study))

    rejected = [t for t in study.get_trials() if t.user_attrs.get(schema.ATTR_KIND) == TrialKind.REJECTED]
    assert rejected, "seed 0 proposes infeasible configurations: the rule must have rejected some"
    for trial in rejected:
        assert trial.user_attrs[schema.ATTR_PARAMS] in oom
        assert trial.state is TrialState.COMPLETE  # told, so the sampler learns the boundary ...
        assert trial.user_attrs[schema.ATTR_VIOLATION] > 0  # ... as infeasible
        assert trial.user_attrs[schema.ATTR_STATUS] == "invalid"
    # Rejected (and duplicate) proposals are free: the budget counts measured trials only.
    assert len(study.get_trials()) == 40 + len(rejected) + _count(study, TrialKind.DUPLICATE)


def _count(study: optuna.Study, kind: TrialKind) -> int:
    return sum(1 for t in study.get_trials() if t.user_attrs.get(schema.ATTR_KIND) == kind)


# --- (c) a configuration with no record ---------------------------------------------------------


def test_configuration_without_record_stops_the_sweep(tmp_path: Path) -> None:
    text = SPACE.read_text().replace(
        "num_warps: {choices: [4, 8], ordinal: true, default: 8}",
        "num_warps: {choices: [4, 8, 16], ordinal: true, default: 16}",  # feasible by the rule, never measured
    )
    assert "default: 16" in text
    path = tmp_path / "unrecorded.yaml"
    path.write_text(text)
    space = load_space(path, replay=True)
    catcher = bench.StudyCatcher(make_sampler("tpe", 0))
    options = SweepOptions(report=False, storage="memory", replay=RECORDS, tracking=False, n_trials=5, seed=0)
    with pytest.raises(AutotuneError, match="no record for configuration") as caught:
        run_sweep(space, options, progress=Progress(None, None, stream=io.StringIO()), sampler=catcher)
    message = str(caught.value)
    for part in ("BLOCK_M=128", "BLOCK_N=128", "BLOCK_K=64", "num_warps=16", "num_stages=3"):
        assert part in message
    assert catcher.study is not None
    assert [t.state for t in catcher.study.get_trials()] == [TrialState.FAIL]  # nothing left RUNNING


# --- the benchmark's own arithmetic -------------------------------------------------------------


def test_benchmark_measures_trials_to_target() -> None:
    goal = bench.Goal(best=100.0, maximize=True, fixed_budget=3)
    outcome = bench.SweepOutcome([50.0, None, 97.0, 99.0], infeasible_run=0, exhausted=False, seconds=0.0)
    assert outcome.trials_to_target(goal) == 4  # 97 is 3% short; 99 is within 2%
    assert outcome.best_percent_at(goal, 3) == 97.0
    assert bench.SweepOutcome([50.0], 0, False, 0.0).trials_to_target(goal) == float("inf")
    assert bench.percentile([1, 2, 3, float("inf")], 90) == float("inf")
    assert bench.percentile(list(range(1, 11)), 90) == 9


def test_benchmark_table(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--records", str(RECORDS), "--space", str(SPACE), "--seeds", "2", "--budget", "25"]
    assert bench.main([*argv, "--samplers", "random,tpe@no-rule"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = {line.split(" | ")[0].strip("| "): line.split(" | ") for line in lines if line.startswith("| ")}
    assert rows["random"][5] == "0"  # the rule is in the shipped space: nothing infeasible runs
    assert int(rows["tpe@no-rule"][5]) > 0  # without it, OOM configurations are run


@pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning")  # with_margin
@pytest.mark.filterwarnings("ignore:Constraints have been set, but CmaEsSampler")  # worst value instead
def test_no_repeat_keeps_cmaes_searching(space: Space) -> None:
    # CMA-ES on a small grid collapses onto configurations already tried; unwrapped, the sweep at
    # this seed stops as exhausted after 20 measured trials and 150 duplicates.
    cmaes = optuna.samplers.CmaEsSampler(seed=0, with_margin=True, popsize=12, warn_independent_sampling=False)
    catcher = bench.StudyCatcher(bench.NoRepeatSampler(cmaes))
    options = SweepOptions(report=False, storage="memory", replay=RECORDS, tracking=False, n_trials=40, seed=0)
    summary = run_sweep(space, options, progress=Progress(None, None, stream=io.StringIO()), sampler=catcher)
    assert summary.measured == 40, summary.stop_reason
    assert catcher.study is not None
    assert _count(catcher.study, TrialKind.DUPLICATE) <= 10
