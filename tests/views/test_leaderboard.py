"""The leaderboard over real Optuna studies in a sqlite file, recorded the way a sweep records them."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import optuna
import pytest
from recorded_studies import THROUGHPUT_AND_MEMORY, add_trial, failed, make_info, make_study, ok_result

from autotune.errors import AutotuneError
from autotune.measurement import Status, TrialResult
from autotune.records import StudyInfo, StudyRecords, TrialKind, schema
from autotune.views.leaderboard import leaderboard, render

optuna.logging.set_verbosity(optuna.logging.WARNING)


@pytest.fixture
def info() -> StudyInfo:
    return make_info()


@pytest.fixture
def study(tmp_path: Path, info: StudyInfo) -> optuna.Study:
    """default 1000, bf16 3000, fp16 2000 (re-measured at 2100), an over-budget trial, an OOM, a crash."""
    s = make_study(tmp_path, info)
    add_trial(s, info, ok_result(1000.0, batch_size=128), default=True)
    add_trial(s, info, failed(Status.CRASH, "RuntimeError: CUDA error: an illegal memory access", batch_size=64))
    add_trial(s, info, ok_result(3000.0, precision="bf16", batch_size=256), mlflow_run_id="run-bf16")
    add_trial(s, info, failed(Status.OOM, "CUDA out of memory. Tried to allocate 2.00 GiB", batch_size=1024))
    add_trial(
        s,
        info,
        ok_result(4000.0, 90.0, precision="bf16", batch_size=512),
        violation=10.0,
        reason="peak_mem_gib <= 80 broken",
    )
    remeasured = {"values": [2050.0, 2100.0, 2150.0], "median": 2100.0, "cv": 0.02, "metric": "throughput"}
    add_trial(s, info, ok_result(2000.0, precision="fp16", batch_size=256), remeasured=remeasured)
    return s


def test_ranked_feasible_first_then_infeasible_then_failures(study: optuna.Study, info: StudyInfo) -> None:
    rows = leaderboard(study, info)
    assert [(r.rank, r.trial) for r in rows] == [(1, 2), (2, 5), (3, 0), (None, 4), (None, 1), (None, 3)]
    assert [r.status for r in rows[3:]] == ["ok", "crash", "oom"]
    assert not rows[3].feasible and rows[3].value == 4000.0  # a broken constraint keeps its numbers
    assert rows[4].reason == "RuntimeError: CUDA error: an illegal memory access"
    assert rows[4].value is None and rows[4].speedup is None
    assert not any(r.pareto for r in rows)  # one objective: no Pareto front


def test_speedup_against_the_default_trial(study: optuna.Study, info: StudyInfo) -> None:
    rows = {r.trial: r for r in leaderboard(study, info)}
    assert rows[0].default and rows[0].speedup == pytest.approx(1.0)
    assert rows[2].speedup == pytest.approx(3.0)
    assert rows[5].speedup == pytest.approx(2.1)  # the re-measured median, not the first measurement


def test_speedup_is_none_without_an_ok_default(tmp_path: Path, info: StudyInfo) -> None:
    s = make_study(tmp_path, info)
    add_trial(s, info, failed(Status.OOM, "CUDA out of memory"), default=True)
    add_trial(s, info, ok_result(500.0))
    assert [r.speedup for r in leaderboard(s, info)] == [None, None]


def test_minimised_objective_ranks_low_first_and_speedup_inverts(tmp_path: Path) -> None:
    info = make_info((("step_ms_p50", "minimize"),))
    s = make_study(tmp_path, info)
    add_trial(s, info, ok_result(1000.0), default=True)  # 128 ms
    add_trial(s, info, ok_result(4000.0))  # 32 ms
    rows = leaderboard(s, info)
    assert [r.trial for r in rows] == [1, 0]
    assert rows[0].speedup == pytest.approx(4.0)


def test_remeasured_median_overrides_a_lucky_first_measurement(tmp_path: Path, info: StudyInfo) -> None:
    s = make_study(tmp_path, info)
    add_trial(s, info, ok_result(1000.0), default=True)
    # First measured at 5000 (an outlier); three fresh processes say 1500.
    lucky = {"values": [1450.0, 1500.0, 1600.0], "median": 1500.0, "cv": 0.04, "metric": "throughput"}
    add_trial(s, info, ok_result(5000.0, batch_size=64), remeasured=lucky)
    add_trial(s, info, ok_result(2000.0, batch_size=128))
    rows = leaderboard(s, info)
    assert [(r.trial, r.value) for r in rows] == [(2, 2000.0), (1, 1500.0), (0, 1000.0)]
    assert rows[1].remeasured is not None and lucky.items() <= rows[1].remeasured.items()
    best = StudyRecords.read(s, info).winner
    assert best is not None and best.number == 2


def test_no_winner_without_a_feasible_trial(tmp_path: Path, info: StudyInfo) -> None:
    s = make_study(tmp_path, info)
    assert StudyRecords.read(s, info).winner is None
    add_trial(s, info, failed(Status.TIMEOUT, "trial exceeded 600 s"))
    assert StudyRecords.read(s, info).winner is None


def test_rejected_and_duplicate_trials_stay_off_the_board(study: optuna.Study, info: StudyInfo) -> None:
    attrs = {schema.ATTR_KIND: TrialKind.DUPLICATE.value, schema.ATTR_DUPLICATE_OF: 2}
    attrs[schema.ATTR_RESULT] = ok_result(3000.0).to_dict()
    study.add_trial(
        optuna.trial.create_trial(state=optuna.trial.TrialState.COMPLETE, values=[3000.0], user_attrs=attrs)
    )
    assert len(leaderboard(study, info)) == 6


@pytest.fixture
def pareto_study(tmp_path: Path) -> tuple[optuna.Study, StudyInfo]:
    info = make_info(THROUGHPUT_AND_MEMORY)
    s = make_study(tmp_path, info)
    add_trial(s, info, ok_result(1000.0, 4.0), default=True)  # 0: least memory: on the front
    add_trial(s, info, ok_result(3000.0, 30.0, batch_size=512))  # 1: fastest: on the front
    add_trial(s, info, ok_result(2000.0, 12.0, batch_size=256))  # 2: between: on the front
    add_trial(s, info, ok_result(1800.0, 20.0, batch_size=384))  # 3: dominated by 2
    add_trial(s, info, ok_result(3000.0, 35.0, batch_size=640))  # 4: dominated by 1 (ties throughput)
    add_trial(s, info, ok_result(9000.0, 1.0), violation=2.0)  # 5: would dominate all, but infeasible
    return s, info


def test_pareto_flags_for_two_objectives(pareto_study: tuple[optuna.Study, StudyInfo]) -> None:
    s, info = pareto_study
    rows = {r.trial: r for r in leaderboard(s, info)}
    assert {n for n, r in rows.items() if r.pareto} == {0, 1, 2}
    assert [r.trial for r in leaderboard(s, info) if r.rank] == [1, 4, 2, 3, 0]  # ranked by the first objective


def test_choose_without_a_rule_takes_rank_one(study: optuna.Study, info: StudyInfo) -> None:
    assert StudyRecords.read(study, info).choose().number == 2


def test_choose_with_a_rule(study: optuna.Study, info: StudyInfo) -> None:
    records = StudyRecords.read(study, info)
    assert records.choose("precision == 'fp16'").number == 5  # params may be named too
    assert records.choose("throughput < 2050").number == 0  # the median stands for throughput
    with pytest.raises(AutotuneError, match="no feasible ok trial satisfies 'peak_mem_gib <= 1'"):
        records.choose("peak_mem_gib <= 1")
    with pytest.raises(AutotuneError, match="unknown name 'peak_mem'"):
        records.choose("peak_mem <= 1")


def test_choose_prefers_pareto_rows_with_several_objectives(pareto_study: tuple[optuna.Study, StudyInfo]) -> None:
    s, info = pareto_study
    records = StudyRecords.read(s, info)
    # Trial 3 ranks above trial 0 by throughput, but only trial 0 is on the front.
    assert records.choose("peak_mem_gib <= 25").number == 2
    assert records.choose("throughput < 2000").number == 0


def test_choose_with_nothing_feasible(tmp_path: Path, info: StudyInfo) -> None:
    s = make_study(tmp_path, info)
    add_trial(s, info, failed(Status.CRASH, "segfault"))
    with pytest.raises(AutotuneError, match="no feasible ok trial"):
        StudyRecords.read(s, info).choose()


def test_render_table_fits_a_100_column_terminal_with_every_knob(study: optuna.Study, info: StudyInfo) -> None:
    text = render(leaderboard(study, info), info, "table", width=100)
    lines = text.splitlines()
    assert lines[0].startswith("resnet50 (full) on cuda: throughput (maximize); 6 measured trials")
    assert lines[1].split()[:4] == ["rank", "trial", "throughput", "speedup"]
    assert max(map(len, lines)) <= 100
    first, knobs = lines[2], lines[3]
    assert "3,000 images/s" in first and "3.00x" in first and "run-bf16" not in text
    assert knobs.split() == ["precision=bf16", "batch_size=256"]  # the winner's whole configuration, under it
    assert "ok (default)" in text
    assert "2,100 images/s ±2.0%" in text and "ok (median of 3)" in text
    assert "infeasible: peak_mem_gib <= 80 broken" in text
    assert "crash: RuntimeError: CUDA error: an illegal memory access" in text  # a reason in full, never cut


def test_render_table_wide_keeps_one_line_per_trial(study: optuna.Study, info: StudyInfo) -> None:
    lines = render(leaderboard(study, info), info, "table", width=100, wide=True).splitlines()
    assert len(lines) == 2 + 6 and lines[1].split()[-2:] == ["status", "knobs"]
    assert lines[2].split()[-3:] == ["ok", "precision=bf16", "batch_size=256"]
    assert "crash: RuntimeError: CUDA error: an illegal memory access  precision=default batch_size=64" in lines[6]


def test_render_table_fits_one_line_per_trial_where_the_terminal_is_wide_enough(
    study: optuna.Study, info: StudyInfo
) -> None:
    assert render(leaderboard(study, info), info, "table", width=200) == render(
        leaderboard(study, info), info, "table", width=100, wide=True
    )


def test_render_table_wraps_long_knobs_and_says_constant_ones_once(tmp_path: Path, info: StudyInfo) -> None:
    s = make_study(tmp_path, info)
    add_trial(s, info, ok_result(1000.0, batch_size=32, **{f"knob_{i}": "a" * 12 for i in range(20)}), default=True)
    add_trial(s, info, ok_result(2000.0, batch_size=64, **{f"knob_{i}": "b" * 12 for i in range(20)}))
    lines = render(leaderboard(s, info), info, "table", width=100).splitlines()
    assert max(map(len, lines)) <= 100
    shown = " ".join(lines[3 : lines.index(next(line for line in lines if line.lstrip().startswith("2 ")))])
    assert all(f"knob_{i}={'b' * 12}" in shown for i in range(20)) and "batch_size=64" in shown
    assert lines[-1] == "same in every row: precision=default"  # said once, not in each row
    top = render(leaderboard(s, info), info, "table", top=1, width=100).splitlines()
    assert top[0].endswith("2 measured trials, top 1 shown") and "same in every row" not in "\n".join(top)


def test_render_csv_parses_back(study: optuna.Study, info: StudyInfo) -> None:
    rows = list(csv.DictReader(io.StringIO(render(leaderboard(study, info), info, "csv"))))
    assert [r["trial"] for r in rows] == ["2", "5", "0", "4", "1", "3"]
    first = rows[0]
    assert first["rank"] == "1" and first["precision"] == "bf16" and first["batch_size"] == "256"
    assert float(first["throughput"]) == 3000.0 and float(first["speedup"]) == pytest.approx(3.0)
    assert rows[1]["remeasured_median"] == "2100.0" and rows[1]["remeasured_cv"] == "0.02"
    assert rows[4]["status"] == "crash" and rows[4]["rank"] == "" and "illegal memory" in rows[4]["reason"]


def test_render_json_parses_back(pareto_study: tuple[optuna.Study, StudyInfo]) -> None:
    s, info = pareto_study
    data = json.loads(render(leaderboard(s, info), info, "json", top=3))
    assert [d["trial"] for d in data] == [1, 4, 2]
    assert data[0]["params"] == {"precision": "default", "batch_size": 512}
    assert data[0]["metrics"]["peak_mem_gib"] == 30.0 and data[0]["pareto"] is True
    assert data[1]["pareto"] is False


def test_render_pareto_column(pareto_study: tuple[optuna.Study, StudyInfo]) -> None:
    s, info = pareto_study
    lines = render(leaderboard(s, info), info, "table", wide=True).splitlines()
    assert lines[1].split()[:4] == ["rank", "trial", "pareto", "throughput"]
    marked = [line.split()[1] for line in lines[2:] if len(line.split()) > 2 and line.split()[2] == "*"]
    assert marked == ["1", "2", "0"]


def test_render_rejects_bad_arguments(study: optuna.Study, info: StudyInfo) -> None:
    rows = leaderboard(study, info)
    with pytest.raises(AutotuneError, match="format 'xml' is not valid"):
        render(rows, info, "xml")  # type: ignore[arg-type]
    with pytest.raises(AutotuneError, match="top=0"):
        render(rows, info, "table", top=0)
    assert "no measured trials" in render([], info, "table")


def with_flops(result: TrialResult, tflops: float, mfu: float | None) -> TrialResult:
    """``result`` of a training step whose model FLOPs were counted (``mfu`` None: a GPU of unknown peak)."""
    result.metrics |= {"model_flops_per_step": tflops * result.metrics["step_ms_p50"] * 1e9, "tflops": tflops}
    if mfu is not None:
        result.metrics["mfu"] = mfu
    return result


def test_table_shows_tflops_and_mfu_within_100_columns(tmp_path: Path, info: StudyInfo) -> None:
    s = make_study(tmp_path, info)
    add_trial(s, info, with_flops(ok_result(1000.0, batch_size=128), 41.2, 0.0416), default=True)
    remeasured = {"values": [2950.0, 3000.0, 3050.0], "median": 3000.0, "cv": 0.02, "metric": "throughput"}
    winner = with_flops(ok_result(3000.0, precision="bf16", batch_size=256), 632.8, 0.6395)
    add_trial(s, info, winner, remeasured=remeasured)
    add_trial(s, info, with_flops(ok_result(2000.0, precision="fp16", batch_size=256), 12.5, None))
    add_trial(s, info, failed(Status.OOM, "CUDA out of memory. Tried to allocate 2.00 GiB", batch_size=1024))
    rows = leaderboard(s, info)
    shown = [(r.trial, r.tflops, r.mfu) for r in rows]
    assert shown == [(1, 632.8, 0.6395), (2, 12.5, None), (0, 41.2, 0.0416), (3, None, None)]
    lines = render(rows, info, "table", width=100).splitlines()
    assert max(map(len, lines)) <= 100
    # Beside a re-measured value the figures fill the line: each trial's status heads its knobs, under them.
    assert lines[1].split()[-2:] == ["TFLOP/s", "MFU"]
    assert lines[2].split()[-2:] == ["632.8", "64%"] and lines[3].split() == [
        "ok", "(median", "of", "3):", "precision=bf16", "batch_size=256"
    ]  # fmt: skip
    assert lines[4].split()[-2:] == ["12.5", "-"]  # no peak known: TFLOP/s alone
    assert lines[6].split()[-2:] == ["41.2", "4%"] and lines[7].startswith("      ok (default): precision=default")
    assert (
        lines[8].split()[-2:] == ["-", "-"] and lines[10] == "      oom: CUDA out of memory. Tried to allocate 2.00 GiB"
    )
    assert {"tflops": 632.8, "mfu": 0.6395}.items() <= json.loads(render(rows, info, "json"))[0].items()
    csv_rows = list(csv.DictReader(io.StringIO(render(rows, info, "csv"))))
    assert (csv_rows[0]["tflops"], csv_rows[0]["mfu"]) == ("632.8", "0.6395")


def test_table_has_no_flops_columns_where_no_trial_counted_them(study: optuna.Study, info: StudyInfo) -> None:
    assert "TFLOP/s" not in render(leaderboard(study, info), info, "table", width=100)
