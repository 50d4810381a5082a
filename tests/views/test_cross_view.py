"""One truth in every view: generated study histories, recorded by the sweep's own recorder, read by every view.

Each history mixes ok trials, trials that broke a constraint, pruned, out-of-memory and crashed ones,
duplicates and rejected proposals, some re-measured in fresh processes; with one objective (maximized or
minimized) or two. Every view must name the same winner with the same numbers: the leaderboard (table,
JSON), export (and what ``verify`` reads back from it), ``status``, the report, the sweep's summary and
progress line, MLflow's runs and description, and the study attribute optuna-dashboard shows; Optuna's
own trials must tell the same story (a duplicate carries its source's state and values).
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import optuna
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from optuna.trial import TrialState
from pythonpath import child_env

from autotune.errors import AutotuneError
from autotune.measurement import Status, TrialResult
from autotune.numbers import number as number_text
from autotune.records import StudyInfo, StudyRecords, TrialKind, schema
from autotune.space import Space, load_space
from autotune.sweep.context import SweepContext
from autotune.sweep.options import SweepOptions
from autotune.sweep.proposals.proposer import Proposal
from autotune.sweep.recorder import Recorder
from autotune.sweep.stages.remeasure import medians
from autotune.sweep.stages.summary import summarize, summary_text
from autotune.tracking.description import SweepFacts, finished
from autotune.tracking.trial_runs import TrialBatch
from autotune.views.export import export
from autotune.views.leaderboard import leaderboard, render
from autotune.views.progress import Progress, winner_text
from autotune.views.report.data import gather
from autotune.views.status import sweep_status
from autotune.views.verify import _recorded

optuna.logging.set_verbosity(optuna.logging.WARNING)

MEMORY_LIMIT = 40.0  # the constraint every generated space carries: peak_mem_gib <= 40
OBJECTIVE_SETS = {
    "throughput": [("throughput", "maximize")],
    "step time": [("step_ms_p50", "minimize")],
    "throughput and memory": [("throughput", "maximize"), ("peak_mem_gib", "minimize")],
}
OUTCOMES = ("ok", "ok", "ok", "infeasible", "pruned", "oom", "crash", "duplicate", "rejected")


@dataclass(frozen=True)
class Planned:
    """One proposal of a generated history: how it ends, its speed and memory, and a re-measurement factor."""

    outcome: str
    throughput: float
    memory: float
    remeasured_as: float | None  # the re-measured median over the first measurement, if it is re-measured
    source: int  # for a duplicate: which earlier measured configuration it repeats (modulo their number)


planned = st.builds(
    Planned,
    outcome=st.sampled_from(OUTCOMES),
    throughput=st.floats(50.0, 5000.0),
    memory=st.floats(1.0, 39.0),
    remeasured_as=st.one_of(st.none(), st.floats(0.3, 1.3)),
    source=st.integers(0, 20),
)


def _space(folder: Path, objectives: list[tuple[str, str]]) -> Space:
    listed = ", ".join(f"{{metric: {m}, direction: {d}}}" for m, d in objectives)
    path = folder / "space.yaml"
    path.write_text(
        "workload: {name: tiny_mlp, preset: tiny}\n"
        "device: cpu\n"
        f"objective: [{listed}]\n"
        f'constraints: ["peak_mem_gib <= {MEMORY_LIMIT}"]\n'
        "params:\n  batch_size: {choices: [8, 16, 32, 64], default: 8}\n  precision: [default, bf16]\n"
    )
    return load_space(path, replay=True)


def _result(plan: Planned, params: dict[str, object]) -> TrialResult:
    if plan.outcome in ("oom", "crash"):
        return TrialResult.failed(Status(plan.outcome), f"{plan.outcome} in a generated history", params)
    if plan.outcome == "pruned":
        metrics = {"throughput": plan.throughput * 0.3, "throughput_unit": "samples/s", "items_per_step": 8.0}
        return TrialResult(Status.PRUNED, "warm-up throughput below the bound", params, metrics, series={})
    memory = plan.memory + (MEMORY_LIMIT if plan.outcome == "infeasible" else 0.0)
    metrics = {
        "throughput": plan.throughput,
        "throughput_unit": "samples/s",
        "step_ms_p50": 1e5 / plan.throughput,
        "peak_mem_gib": memory,
    }
    return TrialResult(Status.OK, None, params, metrics, {"cpu": "generated"})


def _record_history(space: Space, info: StudyInfo, history: list[Planned]) -> tuple[optuna.Study, StudyRecords]:
    """Write ``history`` into a fresh study through the sweep's recorder; the first proposal is the default."""
    study = optuna.create_study(directions=space.directions)
    study.set_user_attr(schema.STUDY_ATTR_INFO, info.to_dict())
    records = StudyRecords.read(study, info)
    recorder = Recorder(study, space, info.objectives, records, None)
    study.enqueue_trial({}, user_attrs={schema.ATTR_DEFAULT: True})
    for index, plan in enumerate(history):
        trial = study.ask()
        params: dict[str, object] = {"batch_size": 8 * (index + 1), "precision": "bf16" if index else "default"}
        measured = records.measured
        if plan.outcome == "duplicate" and index and measured:
            source = measured[plan.source % len(measured)]
            trial.set_user_attr(schema.ATTR_PARAMS, source.params)
            assert source.result is not None
            proposal = Proposal(trial, source.params, TrialKind.DUPLICATE, source.result, source)
            recorder.record(proposal, source.result)
        elif plan.outcome == "rejected" and index:
            trial.set_user_attr(schema.ATTR_PARAMS, params)
            answer = TrialResult.failed(Status.INVALID, "rejected by rule: generated", params)
            recorder.record(Proposal(trial, params, TrialKind.REJECTED, answer), answer)
        else:
            trial.set_user_attr(schema.ATTR_PARAMS, params)
            plan = plan if plan.outcome not in ("duplicate", "rejected") else replace(plan, outcome="ok")
            recorder.record(Proposal(trial, params, TrialKind.MEASURED), _result(plan, params))
        records.refresh()
    _remeasure(study, records, history)
    return study, records


def _remeasure(study: optuna.Study, records: StudyRecords, history: list[Planned]) -> None:
    """What the re-measure stage stores for the top 3 whose plan re-measures them."""
    for record in records.ranked[:3]:
        factor = history[min(record.number, len(history) - 1)].remeasured_as
        if factor is None or record.result is None:
            continue
        runs = []
        for scale in (0.99 * factor, factor, 1.01 * factor):
            metrics = dict(record.result.metrics)
            metrics["throughput"] *= scale
            metrics["step_ms_p50"] /= scale
            runs.append(TrialResult(Status.OK, None, record.params, metrics))
        values = [float(r.metrics[records.metric]) for r in runs]
        data = {"metric": records.metric, "values": values, "median": values[1], "cv": 0.01, "metrics": medians(runs)}
        study.set_user_attr(schema.remeasured_key(record.number), data)
        records.note_remeasured(record.number, data)


def _context(space: Space, study: optuna.Study, info: StudyInfo, records: StudyRecords) -> SweepContext:
    options = SweepOptions(storage="memory", tracking=False, remeasure_top=0)
    progress = Progress(None, None, io.StringIO())

    def never(*_: object) -> TrialResult:
        raise AssertionError("nothing runs in a generated history")

    return SweepContext(space, options, study, study._storage, info, records, never, progress, None)


def _first_view_checks(study: optuna.Study, info: StudyInfo, records: StudyRecords, folder: Path) -> None:
    """Every view against the records' winner, value and speedup."""
    winner = records.winner
    rows = leaderboard(study, info)
    summary = summarize(_context(_space(folder, list(info.objectives)), study, info, records), "generated", 0.0)
    data = gather(study, info, "memory")
    status = sweep_status(study, info)
    facts = SweepFacts("s", "1", "parent", StudyRecords.read(study, info))
    text = finished(facts)
    stored = study.user_attrs.get(schema.STUDY_ATTR_WINNER)
    batches = {r.number: TrialBatch.build(r, records.speedup(r)) for r in records.measured}
    speedups = {n: next((m.value for m in b.metrics if m.key == "speedup"), None) for n, b in batches.items()}

    assert [r.trial for r in rows if r.pareto] == [r.trial for r in rows if r.trial in records.pareto]
    assert {p.number for p in data.points if p.pareto} == set(records.pareto)
    assert data.time == summary.time == records.time()
    for record in records.measured:  # MLflow: only feasible trials carry a speedup, so none outranks the winner
        assert (speedups[record.number] is not None) == (record.feasible and records.baseline is not None)
        if record.pruned:
            assert "throughput" not in {m.key for m in batches[record.number].metrics}
    if winner is None:
        assert not [r for r in rows if r.rank] and summary.best_trial is None and data.winner is None
        assert status.best is None and stored is None and text.startswith("**No winner:**")
        with pytest.raises(AutotuneError, match="no feasible ok trial"):
            export(study, info, folder / "tuned.yaml")
        return
    number, value, speedup = winner.number, winner.value, records.speedup(winner)
    assert value is not None  # a winner ranks by its value
    assert (rows[0].rank, rows[0].trial, rows[0].value, rows[0].speedup) == (1, number, value, speedup)
    assert json.loads(render(rows, info, "json"))[0]["trial"] == number
    assert (summary.best_trial, summary.best_value, summary.speedup) == (number, value, speedup)
    assert f"best: trial {number} ({number_text(value)}" in summary_text(summary, "memory")
    assert data.winner is not None and (data.winner.trial, data.winner.value, data.winner.speedup) == (
        number,
        value,
        speedup,
    )
    assert status.best == winner_text(records) and status.best.startswith(f"t{number:03d} ")
    assert stored is not None and (stored["trial"], stored["value"], stored["speedup"]) == (number, value, speedup)
    default = records.default
    head = "**Winner: the PyTorch defaults**" if default is not None and default.number == number else ""
    assert text.startswith(head or f"**Winner: trial {number}**")
    ranked_speedups = {n: s for n, s in speedups.items() if s is not None}
    if ranked_speedups:  # sorted by speedup, MLflow's view lists the winner first (ties: to 4 decimals)
        assert ranked_speedups[number] == max(ranked_speedups.values())
    config = export(study, info, folder / "tuned.yaml")
    provenance = config.provenance
    assert provenance["trial"] == number and provenance["metrics"][records.metric] == value
    assert _recorded(provenance, records.metric)[0] == value  # what `autotune verify` compares against
    if speedup is not None:
        assert provenance["metrics"]["speedup_vs_default"] == round(speedup, 4)


def _optuna_checks(study: optuna.Study, records: StudyRecords) -> None:
    """Optuna's trials tell the records' story: a duplicate has its source's state and values."""
    trials = study.get_trials(deepcopy=False)
    for record in records.trials:
        if record.kind is TrialKind.DUPLICATE and record.duplicate_of is not None:
            source, copy = trials[record.duplicate_of], trials[record.number]
            assert copy.state is source.state and copy.values == source.values
            assert copy.user_attrs[schema.ATTR_DUPLICATE_OF] == source.number
        if record.measured and record.pruned:
            assert trials[record.number].state is TrialState.PRUNED


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    objectives=st.sampled_from(sorted(OBJECTIVE_SETS)),
    history=st.lists(planned, min_size=1, max_size=12),
)
def test_every_view_names_one_winner_with_one_set_of_numbers(objectives: str, history: list[Planned]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        space = _space(folder, OBJECTIVE_SETS[objectives])
        info = StudyInfo("tiny_mlp", "tiny", "cpu", str(space.path), space.text, tuple(OBJECTIVE_SETS[objectives]))
        study, records = _record_history(space, info, history)
        _optuna_checks(study, records)
        _first_view_checks(study, info, records, folder)


REAL_SPACE = """\
workload: {name: "trial_workloads:roomy", preset: tiny}
device: cpu
constraints: ["peak_mem_gib <= 1.2"]   # the batch of 64 holds 1.5 GiB more: the fastest breaks it
budget: {trials: 3, trial_timeout: 2m}
sampler: {name: grid, seed: 0}
params:
  batch_size: {choices: [8, 16, 64], default: 8}
"""


@pytest.mark.slow
def test_a_real_sweep_with_a_constraint_reads_the_same_everywhere(tmp_path: Path) -> None:
    """A real CPU sweep with MLflow on, read through mlflow.search_runs, optuna.load_study and the commands."""

    (tmp_path / "real.yaml").write_text(REAL_SPACE)
    tracking = f"sqlite:///{tmp_path}/mlflow.db"
    swept = run(tmp_path, ["sweep", "real.yaml", "--tracking-uri", tracking, "--remeasure-repeats", "2"])
    assert swept.returncode == 0, swept.stderr

    study = optuna.load_study(study_name="real", storage=f"sqlite:///{tmp_path}/autotune.db")
    info = schema.load_study_info(study)
    assert info is not None
    records = StudyRecords.read(study, info)
    winner, infeasible = records.winner, [r for r in records.measured if r.outcome == "infeasible"]
    assert winner is not None and [r.params["batch_size"] for r in infeasible] == [64]
    number, value = winner.number, winner.value
    assert value is not None and winner.remeasured is not None  # re-measured: every view shows the median

    tflops = winner.tflops  # its step's model FLOPs over its re-measured step time; no MFU on a CPU
    assert tflops is not None and tflops > 0 and winner.mfu is None
    board = json.loads(run(tmp_path, ["leaderboard", "--study", "real", "--format", "json"]).stdout)
    assert (board[0]["trial"], board[0]["value"], board[0]["rank"]) == (number, value, 1)
    assert (board[0]["tflops"], board[0]["mfu"]) == (tflops, None)
    assert f"  {number_text(tflops)}    -" in run(tmp_path, ["leaderboard", "--study", "real"]).stdout
    status = run(tmp_path, ["status", "--study", "real"]).stdout
    assert f"best so far: t{number:03d} {number_text(value)}" in status and "1 broke a constraint" in status
    assert run(tmp_path, ["export", "--study", "real", "-o", "tuned.yaml"]).returncode == 0
    provenance = yaml.safe_load((tmp_path / "tuned.yaml").read_text())["provenance"]
    assert provenance["trial"] == number and provenance["metrics"]["throughput"] == value
    assert run(tmp_path, ["report", "--study", "real", "-o", "report.html", "--no-mlflow"]).returncode == 0
    page = (tmp_path / "report.html").read_text()
    assert f"winner (trial {number})" in page and f"; {number_text(tflops)} TFLOP/s</p>" in page
    assert f"best: trial {number} ({number_text(value)}, median of 2 re-measurements" in swept.stdout
    assert f"; {number_text(tflops)} TFLOP/s\n" in swept.stdout

    assert study.user_attrs[schema.STUDY_ATTR_WINNER]["trial"] == number  # where optuna-dashboard shows it
    assert (
        study.best_trial.number
        == max(  # Optuna's own best is a first measurement (the README says so)
            (r for r in records.measured if r.feasible), key=lambda r: r.first_values[0] if r.first_values else 0.0
        ).number
    )

    runs = _search(tracking)  # as the view "autotune leaderboard" sorts them
    assert int(runs[0].data.tags["autotune.trial"]) == number  # the leaderboard view's first row is the winner
    by_trial = {int(r.data.tags["autotune.trial"]): r for r in runs}
    assert by_trial[infeasible[0].number].data.tags["autotune.feasible"] == "false"
    assert "speedup" not in by_trial[infeasible[0].number].data.metrics
    assert by_trial[number].data.metrics["remeasured_throughput"] == pytest.approx(value, rel=1e-5)
    first = winner.first_metrics  # a trial's run has its own measurement, the re-measured median apart
    assert by_trial[number].data.metrics["tflops"] == pytest.approx(first["tflops"], rel=1e-5)
    assert by_trial[number].data.metrics["model_flops_per_step"] == first["model_flops_per_step"]
    parent = _search(tracking, role="sweep")[0]
    note = parent.data.tags["mlflow.note.content"]
    assert note.startswith(f"**Winner: trial {number}**") or note.startswith("**Winner: the PyTorch defaults**")
    assert f"at {number_text(tflops)} TFLOP/s" in note.splitlines()[0]
    assert (
        parent.data.metrics["best_tflops"] == pytest.approx(tflops, rel=1e-5) and "best_mfu" not in parent.data.metrics
    )


def run(folder: Path, args: list[str]) -> subprocess.CompletedProcess[str]:
    """``autotune ARGS`` in ``folder``, the test workloads importable, no MLflow server in the environment."""
    env = child_env(without=["MLFLOW_TRACKING_URI"])
    command = [sys.executable, "-m", "autotune", *args]
    return subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=600)


def _search(tracking: str, role: str = "trial") -> list[Any]:
    """``mlflow.search_runs`` over the study's experiment, by speedup (what the saved view sorts by)."""
    import mlflow

    mlflow.set_tracking_uri(tracking)
    try:
        return list(
            mlflow.search_runs(
                experiment_names=["autotune/real"],
                filter_string=f"tags.`autotune.role` = '{role}'",
                order_by=["metrics.speedup DESC"],
                output_format="list",
            )
        )
    finally:
        # unset: the global (and the variable it sets) would outlive this test; mlflow takes None for it, though
        # its annotation leaves None out
        mlflow.set_tracking_uri(None)  # type: ignore[arg-type]
