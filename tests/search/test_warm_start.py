"""``autotune sweep --warm-start OTHER``: the sampler starts from another study's measured trials.

Replay sweeps of the recorded H200 matmul on a real SQLite file: a study ``A`` is swept first, then
studies warm-started from it. The evidence must steer the sampler and appear nowhere else: not in the
warm study's storage, budget, leaderboard or export.
"""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path
from typing import Any

import optuna
import pytest
from replay_records import MATMUL_RECORDS
from study_records import measured_records

from autotune.errors import AutotuneError
from autotune.records import TrialRecord, schema
from autotune.search.evidence import from_study, load_evidence
from autotune.search.replay import ReplayRecords
from autotune.space import Space, load_space
from autotune.storage.rdb import open_storage
from autotune.sweep import SweepOptions, run_sweep
from autotune.views.leaderboard import leaderboard
from autotune.views.progress import Progress
from autotune.views.status import sweep_status

REPO = Path(__file__).resolve().parents[2]
SPACE = REPO / "search_spaces" / "triton_matmul.yaml"
RECORDS = MATMUL_RECORDS  # synthetic, of the real records' shape: CI has no data files
EVIDENCE_TRIALS = 20


@pytest.fixture(scope="module")
def space() -> Space:
    return load_space(SPACE, replay=True)


@pytest.fixture(scope="module")
def storage(tmp_path_factory: pytest.TempPathFactory, space: Space) -> str:
    """A SQLite file holding study ``A``: a replay sweep of 20 measured trials, seed 100."""
    url = f"sqlite:///{tmp_path_factory.mktemp('warm') / 'autotune.db'}"
    _sweep(space, url, "A", n_trials=EVIDENCE_TRIALS, seed=100)
    return url


def _sweep(space: Space, storage: str, study: str, *, n_trials: int, seed: int, warm_start: str | None = None) -> str:
    """A replay sweep in this process; returns what it printed."""
    out = io.StringIO()
    options = SweepOptions(
        report=False, study_name=study, storage=storage, replay=RECORDS, tracking=False, n_trials=n_trials, seed=seed,
        warm_start=warm_start,
    )  # fmt: skip
    run_sweep(space, options, progress=Progress(None, None, stream=out))
    return out.getvalue()


def _measured(storage: str, name: str) -> list[TrialRecord]:
    study = optuna.load_study(study_name=name, storage=storage)
    return sorted(measured_records(study), key=lambda t: t.number)


def _key(params: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(sorted(params.items()))


@pytest.mark.parametrize("sampler", ["auto", "tpe"])
def test_a_warm_sweep_starts_where_the_evidence_was_good(space: Space, storage: str, sampler: str) -> None:
    """The first proposal after the default comes from the evidence's good region; good values come sooner than cold."""
    from dataclasses import replace

    space = replace(space, sampler=replace(space.sampler, name=sampler))
    printed = _sweep(space, storage, f"warm-{sampler}", n_trials=6, seed=7, warm_start="A")
    _sweep(space, storage, f"cold-{sampler}", n_trials=6, seed=7)
    assert f"warm start: the sampler starts from {EVIDENCE_TRIALS} trials of study 'A'" in printed

    records = ReplayRecords.load(RECORDS)
    evidence = sorted((t.first_values[0] for t in _measured(storage, "A") if t.first_values), reverse=True)

    def throughputs(name: str) -> list[float]:  # of the measured trials after the default configuration
        trials = _measured(storage, name)[1:]
        return [float(records.lookup(t.params).metrics.get("throughput", 0.0)) for t in trials]

    def best_so_far(values: list[float]) -> float:  # summed over the trials: how soon good configurations came
        return sum(max(values[: i + 1]) for i in range(len(values)))

    warm, cold = throughputs(f"warm-{sampler}"), throughputs(f"cold-{sampler}")
    assert warm[0] >= evidence[len(evidence) // 2], (warm, evidence)  # its first proposal: the evidence's better half
    assert best_so_far(warm) > best_so_far(cold), (warm, cold)


def test_evidence_appears_nowhere_in_the_warm_study(space: Space, storage: str) -> None:
    before = len(optuna.load_study(study_name="A", storage=storage).get_trials())
    _sweep(space, storage, "B", n_trials=5, seed=1, warm_start="A")
    study = optuna.load_study(study_name="B", storage=storage)
    trials = study.get_trials()
    assert all(t.number >= 0 and "autotune.search.evidence" not in t.system_attrs for t in trials)
    assert [t.number for t in trials] == list(range(len(trials)))
    assert len(measured_records(study)) == 5  # the budget counts this study's measurements only
    info = schema.load_study_info(study)
    assert info is not None
    rows = leaderboard(study, info)
    assert len(rows) == 5 and {r.trial for r in rows} <= {t.number for t in trials}
    assert study.user_attrs[schema.STUDY_ATTR_WARM_START] == {"study": "A", "trials": EVIDENCE_TRIALS, "skipped": 0}
    assert f"warm start: the sampler started from {EVIDENCE_TRIALS} trials of study 'A' (evidence)" in (
        sweep_status(study, info).lines()
    )
    assert len(optuna.load_study(study_name="A", storage=storage).get_trials()) == before  # the source untouched

    # Resumed without the flag, it keeps reading the evidence it started from (and says so).
    printed = _sweep(space, storage, "B", n_trials=7, seed=1)
    assert f"warm start: the sampler starts from {EVIDENCE_TRIALS} trials of study 'A'" in printed
    assert len(measured_records(optuna.load_study(study_name="B", storage=storage))) == 7


def test_evidence_from_another_space_uses_the_params_in_common(space: Space, storage: str, tmp_path: Path) -> None:
    narrower = tmp_path / "narrower.yaml"
    narrower.write_text(SPACE.read_text().replace("BLOCK_M: {choices: [64, 128, 256]", "BLOCK_M: {choices: [64, 128]"))
    evidence = from_study(optuna.load_study(study_name="A", storage=storage), load_space(narrower, replay=True))
    outside = sum(t.params["BLOCK_M"] == 256 for t in _measured(storage, "A"))
    assert outside > 0
    assert (len(evidence.points), evidence.skipped) == (EVIDENCE_TRIALS - outside, outside)
    assert f"{outside} skipped: outside this space" in evidence.summary()

    unrelated = tmp_path / "unrelated.yaml"
    unrelated.write_text(
        "workload: {name: triton_matmul, preset: full, args: {dtype: bf16}}\n"
        "objective: {metric: throughput, direction: maximize}\n"
        "params:\n  GROUP_M: {choices: [4, 8], ordinal: true, default: 8}\n"
    )
    with pytest.raises(AutotuneError, match="no param in common"):
        load_evidence("A", open_storage(storage), load_space(unrelated, replay=True), "C")


def test_bad_warm_starts_are_one_line_and_exit_2(storage: str, tmp_path: Path) -> None:
    base = ["sweep", str(SPACE), "--replay", str(RECORDS), "--no-mlflow", "--study", "D", "--storage"]
    unknown = subprocess.run(
        [sys.executable, "-m", "autotune", *base, storage, "--warm-start", "nope"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert unknown.returncode == 2
    assert unknown.stderr.strip().splitlines() == [
        "autotune: error: --warm-start nope: no such study in this storage (studies there: "
        + ", ".join(sorted(s.study_name for s in optuna.get_all_study_summaries(storage)))
        + ")"
    ]
    assert "D" not in {s.study_name for s in optuna.get_all_study_summaries(storage)}  # nothing made for it
    with pytest.raises(AutotuneError, match="cannot warm-start from itself"):
        load_evidence("A", open_storage(storage), load_space(SPACE, replay=True), "A")
    with pytest.raises(AutotuneError, match="--warm-start reads the other study from --storage"):
        SweepOptions(storage="memory", warm_start="A")
