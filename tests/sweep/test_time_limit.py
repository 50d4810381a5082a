"""A sweep's time limit covers its finishing stages: what a finalist is expected to take, what the search leaves
them, finalists that do not fit, one limit for every --gpus worker; and the study's compile cache reaching every
run of a configuration, re-measurements and finalists included. Fake executors and runners: nothing compiles."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import optuna
import pytest
from recorded_studies import add_timed, make_info, make_study

from autotune.measurement import Status, TrialResult
from autotune.records import StudyRecords, schema
from autotune.space import load_space
from autotune.space.settings import FinalistsSpec
from autotune.sweep import Sweep, SweepOptions, run_sweep
from autotune.sweep.setup import trial_budget
from autotune.sweep.stages.time_limit import TimeLimit, finalist_estimate, finalist_sources, remeasure_run_s
from autotune.trial.compilecache import study_cache_dir
from autotune.trial.pruning import Pruning
from autotune.trial.trialspec import TrialSpec
from autotune.views.progress import Progress

CDT = FinalistsSpec(top=1, inductor={"coordinate_descent_tuning": True})
INFO = make_info()


def records(study: optuna.Study) -> StudyRecords:
    return StudyRecords.read(study, INFO)


def test_a_finalist_needs_its_measuring_its_options_compile_and_its_remeasurements() -> None:
    study = make_study(None, INFO)
    source = add_timed(study, "default", seconds=50.0, compile_s=25.0, value=100.0)
    found = records(study)
    estimate = finalist_estimate(found.trial(source), CDT, found, remeasure_runs=3)
    # 25 s measuring + 25 s x 6 compiling; each re-measurement 25 s + a tenth of that compile, from the cache.
    assert estimate.seconds == pytest.approx(25 + 150 + 3 * (25 + 15))
    assert "x6 for coordinate_descent_tuning" in estimate.why and "3 re-measurements 2m00s" in estimate.why
    both = FinalistsSpec(top=1, compile_mode="max-autotune", inductor={"coordinate_descent_tuning": True})
    assert finalist_estimate(found.trial(source), both, found).seconds == pytest.approx(25 + 25 * 13)


def test_the_studys_own_finalist_and_cold_compiles_set_the_estimate() -> None:
    study = make_study(None, INFO)
    source = add_timed(study, "default", seconds=50.0, compile_s=25.0, value=100.0)
    cached = add_timed(study, "default", seconds=27.0, compile_s=2.0, value=99.0)  # compiled from the study's cache
    add_timed(study, "default", seconds=40.0, compile_s=100.0 / 4, value=90.0)
    add_timed(study, "default", seconds=125.0, compile_s=100.0, value=101.0, finalist_of=source)  # 4x its source
    found = records(study)
    estimate = finalist_estimate(found.trial(cached), CDT, found)
    # Its graph costs the study's median cold compile (25 s), not its cached 2 s; the options x4, as trial 3 showed.
    assert estimate.seconds == pytest.approx(25 + 25 * 4)
    assert "as finalist trial 3 did" in estimate.why


def limit(
    tmp_path: Path, deadline: float | None, timeout: str = "1000s", modes: str = "none, default", **options: Any
) -> TimeLimit:
    space = tmp_path / "space.yaml"
    space.write_text(
        f"""\
workload: {{name: "trial_workloads:tiny_mlp", preset: tiny}}
device: cpu
budget: {{trials: 100, timeout: {timeout}}}
sampler: {{name: tpe, seed: 0}}   # what the search draws, and so which trial a finalist re-tries, holds run to run
params:
  compile_mode: [{modes}]
  batch_size: {{low: 1, high: 100000}}
finalists: {{top: 1, inductor: {{coordinate_descent_tuning: true}}}}
"""
    )
    return TimeLimit.of(deadline, load_space(space), SweepOptions(remeasure_top=1, remeasure_repeats=2, **options))


def test_the_search_leaves_the_finishing_stages_their_time(tmp_path: Path) -> None:
    study = make_study(None, INFO)
    add_timed(study, "none", seconds=10.0, compile_s=0.0, value=50.0)
    add_timed(study, "default", seconds=50.0, compile_s=25.0, value=100.0)
    found = records(study)
    # Re-measuring the winner twice (2 x 27.5 s), rehearsing its start (about one more), then its finalist: 25 + 150
    # and 2 re-measurements of 40 s.
    reserve = 3 * 27.5 + 25 + 150 + 2 * 40
    deadline = 10_000.0
    assert limit(tmp_path, deadline).reserve(found) == pytest.approx(reserve)
    typical = 30.0  # the median search trial: the next one must end before the reserve begins
    assert limit(tmp_path, deadline).search_over(found, now=deadline - reserve - typical - 1) is None
    over = limit(tmp_path, deadline).search_over(found, now=deadline - reserve - typical + 1)
    assert over == (
        "sweep time limit reached, less the 5m37s kept for the finishing stages (re-measuring, finalists, rehearsing"
        " the winner's start)"
    )
    # At most half the limit is kept from the search, and nothing for a finalist that would not fit in that half
    # (the stage would not start it): only the re-measurements and the rehearsal; all of the half where they need more.
    assert limit(tmp_path, deadline, timeout="680s").reserve(found) == pytest.approx(reserve)
    assert limit(tmp_path, deadline, timeout="400s").reserve(found) == pytest.approx(3 * 27.5)
    assert limit(tmp_path, deadline, timeout="400s", rehearse_start=False).reserve(found) == pytest.approx(2 * 27.5)
    assert limit(tmp_path, deadline, timeout="100s").reserve(found) == pytest.approx(50.0)
    # Nothing under --replay; past the limit, the plain reason.
    assert limit(tmp_path, deadline, replay=tmp_path / "r.json").reserve(found) == 0.0
    assert limit(tmp_path, deadline).search_over(found, now=deadline) == "sweep time limit reached"
    assert limit(tmp_path, None).search_over(found) is None


def test_after_remeasuring_come_the_rehearsal_and_the_finalists_and_timed_runs_bound_a_run(tmp_path: Path) -> None:
    study = make_study(None, INFO)
    eager = add_timed(study, "none", seconds=10.0, compile_s=0.0, value=50.0)
    compiled = add_timed(study, "default", seconds=50.0, compile_s=25.0, value=100.0)
    found = records(study)
    # The winner's start rehearsed (about one run: 25 s measuring, a tenth of its compile) and its finalist (25 + 150,
    # 2 re-measurements of 40 s); not counted where it would not fit in half a 400 s limit, nor in the time left,
    # nor once the finalists stage has run (the re-measurement after it).
    finalist = 25 + 150 + 2 * 40
    assert limit(tmp_path, 10_000.0).after_remeasuring(found, True, 1000.0) == pytest.approx(27.5 + finalist)
    assert limit(tmp_path, 10_000.0, timeout="400s").after_remeasuring(found, True, 1000.0) == pytest.approx(27.5)
    assert limit(tmp_path, 10_000.0).after_remeasuring(found, True, finalist) == pytest.approx(27.5)
    assert limit(tmp_path, 10_000.0).after_remeasuring(found, False, 1000.0) == pytest.approx(27.5)
    # Once the study has timed re-measurement runs of its kind (compiled or eager), a run of a trial not re-measured
    # is reckoned at most as long as the longest of them: a trial's own figures count its pruning probe.
    data = {"metric": "throughput", "values": [50.0, 51.0], "median": 50.5, "cv": 0.01, "seconds": 8.0}
    study.set_user_attr(schema.remeasured_key(eager), data)
    found = records(study)
    assert remeasure_run_s(found.trial(eager), found) == pytest.approx(4.0)
    assert remeasure_run_s(found.trial(compiled), found) == pytest.approx(27.5)  # an eager run bounds no compiled one
    other = add_timed(study, "default", seconds=60.0, compile_s=25.0, value=90.0)
    study.set_user_attr(schema.remeasured_key(other), {**data, "seconds": 20.0})
    found = records(study)
    assert remeasure_run_s(found.trial(compiled), found) == pytest.approx(10.0)
    study.set_user_attr(schema.remeasured_key(other), {**data, "seconds": 100.0})
    found = records(study)
    assert remeasure_run_s(found.trial(compiled), found) == pytest.approx(27.5)  # its own reckoning, when shorter


def test_every_gpus_worker_keeps_the_sweeps_deadline(tmp_path: Path) -> None:
    space = limit(tmp_path, None).space
    assert trial_budget(space, SweepOptions(deadline=123.0)) == (100, 123.0)
    budget, deadline = trial_budget(space, SweepOptions())
    assert budget == 100 and deadline == pytest.approx(time.time() + 1000, abs=5)


class FakeTrials:
    """An executor: a search trial takes ``search_s`` (``compile_s`` of it compiling when compiled), a repeat of a
    configuration ``repeat_s`` (its compile from the cache), a finalist ``finalist_s``; compiled ones are faster."""

    def __init__(self, search_s: float, compile_s: float, repeat_s: float = 0.0, finalist_s: float = 0.05) -> None:
        self.search_s, self.compile_s, self.repeat_s, self.finalist_s = search_s, compile_s, repeat_s, finalist_s
        self.seen: list[dict[str, Any]] = []
        self.last_end = 0.0  # when the last run ended (time.time())

    def __call__(self, params: dict[str, Any], timeout_s: float, pruning: Pruning | None) -> TrialResult:
        compiled = params.get("compile_mode") != "none"
        if "inductor" in params:
            time.sleep(self.finalist_s)
        else:
            time.sleep(self.repeat_s if params in self.seen else self.search_s)
        self.seen.append(dict(params))
        self.last_end = time.time()
        metrics = {"throughput": params["batch_size"] * (2.0 if compiled else 1.0)}
        metrics["compile_s"] = self.compile_s if compiled else 0.0
        return TrialResult(Status.OK, None, dict(params), metrics)


def timed_sweep(
    tmp_path: Path, executor: FakeTrials, timeout: str, modes: str = "none, default"
) -> tuple[Any, str, float, optuna.Study]:
    """The sweep's summary, progress, how long after its start its last run ended (the report is drawn after, in
    seconds), and its study."""
    space = limit(tmp_path, None, timeout=timeout, modes=modes).space
    storage = f"sqlite:///{tmp_path}/t.db"
    options = SweepOptions(
        report=False,
        storage=storage,
        tracking=False,
        remeasure_top=2,
        remeasure_repeats=3,
        informed_start=False,
        prune_ratio=0,
    )
    log = tmp_path / "progress.log"
    started = time.time()
    with log.open("a") as stream:
        summary = Sweep(space, options, executor, Progress(None, None, stream)).run()
    return summary, log.read_text(), executor.last_end - started, optuna.load_study(study_name="space", storage=storage)


@pytest.mark.slow
def test_a_finalist_that_fits_runs_and_the_finishing_stages_end_by_the_limit(tmp_path: Path) -> None:
    # Re-measuring the top 2 thrice and rehearsing the winner's start (about 0.2 s a run, as estimated from the search
    # trials, more where the machine is loaded), then a finalist: 0.2 + 0.25 x 6 s and its 3 re-measurements; about
    # 4 s in all, kept from a 16 s limit (at most half of it is kept). The repeats here take no time, so the
    # finalists stage has that much more than it needs: room for the sweep's own work between runs on a loaded
    # machine (with 0.3 s trials and an 8 s limit it had under 1 s, and once found 1 s left for 2).
    summary, text, ended, study = timed_sweep(tmp_path, FakeTrials(search_s=0.45, compile_s=0.25), timeout="16s")
    assert "kept for the finishing stages" in summary.stop_reason
    finalists = [t for t in study.trials if schema.ATTR_FINALIST_OF in t.user_attrs]
    assert len(finalists) == 1, text
    assert ended < 16.0, text


def test_a_finalist_that_cannot_end_before_the_limit_is_not_started(tmp_path: Path) -> None:
    # A finalist needs about 6 s (its 0.45 s compile x6, three re-measurements): more than the half of 8 s kept for
    # it. The search keeps about 3 s for re-measuring the top 2 thrice, which take no time here: the finalists stage
    # then has that much left to say why it starts nothing (with the 4 s limit and 0.5 s trials this test had, under
    # 1 s was kept, and a loaded 2-core machine once reached the stage past the limit). Every search trial but the
    # default compiles: on a loaded machine the search once had time for two trials only, both eager, and the stage
    # had no source to speak of.
    executor = FakeTrials(search_s=1.0, compile_s=0.45)
    summary, text, ended, study = timed_sweep(tmp_path, executor, timeout="8s", modes="default")
    assert [p for p in executor.seen if p["compile_mode"] == "default"], text
    assert "kept for the finishing stages" in summary.stop_reason
    assert not [t for t in study.trials if schema.ATTR_FINALIST_OF in t.user_attrs]
    lines = [line for line in text.splitlines() if line.startswith("finalists:")]
    assert (
        len(lines) == 1 and "not started: it needs about" in lines[0] and "left of the sweep's time limit" in lines[0]
    ), text
    assert ended < 8.0, text


def test_every_run_of_a_study_compiles_from_its_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    specs: list[TrialSpec] = []
    made: list[bool] = []

    class Runner:  # the trial processes: what each was asked to run
        def __init__(self, compiles: bool = True) -> None:
            made.append(compiles)  # whether its server would preload Inductor's compiler

        def warm(self) -> None:
            pass

        def run(self, spec: TrialSpec, timeout_s: float) -> TrialResult:
            specs.append(spec)
            compiled = spec.params.get("compile_mode") != "none"
            metrics = {"throughput": float(spec.params["batch_size"]) * (2 if compiled else 1), "compile_s": 0.1}
            return TrialResult(Status.OK, None, dict(spec.params), metrics)

    monkeypatch.setattr("autotune.trial_process.TrialRunner", Runner)
    space = limit(tmp_path, None).space
    storage = f"sqlite:///{tmp_path}/c.db"
    options = SweepOptions(
        report=False,
        storage=storage,
        tracking=False,
        n_trials=4,
        remeasure_top=2,
        remeasure_repeats=2,
        informed_start=False,
    )
    run_sweep(space, options, Progress(None, None, open(tmp_path / "log", "w")))  # noqa: SIM115
    finalist = [spec for spec in specs if "inductor" in spec.params]
    # 4 search trials, 2 x 2 re-measurements, the finalist (and its 2 re-measurements when it ranks in the top 2:
    # the sampler draws the batch sizes, so whether it does varies)
    assert len(specs) - len(finalist) == 4 + 4 and len(finalist) in (1, 3)
    assert {spec.compile_cache_dir for spec in specs} == {str(study_cache_dir(storage, "space"))}
    assert made and all(made)  # the space compiles: its trial server preloads the compiler


def test_finalists_are_the_best_configurations_of_distinct_graphs() -> None:
    study = make_study(None, INFO)
    add_timed(study, "none", seconds=5.0, compile_s=0.0, value=120.0)  # eager: the options would change nothing
    best = add_timed(study, "default", seconds=50.0, compile_s=25.0, value=110.0, batch_size=64, cudnn_benchmark=True)
    # its twin: the same graph, cuDNN's benchmark off
    add_timed(study, "default", seconds=27.0, compile_s=2.0, value=109.0, batch_size=64, cudnn_benchmark=False)
    other = add_timed(study, "reduce-overhead", seconds=50.0, compile_s=25.0, value=100.0, batch_size=64)
    two = FinalistsSpec(top=2, inductor={"coordinate_descent_tuning": True})
    assert [record.number for record in finalist_sources(records(study), two)] == [best, other]
