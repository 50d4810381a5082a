"""scripts/cost_benchmark.py and scripts/record_model.py, briefly: a few replayed sweeps over the modelled records,
and the model reproduced from the real trials it was fitted on."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]


def _script(name: str) -> ModuleType:
    """A script of scripts/, imported by path (scripts/ is not a package; cost_benchmark imports search_benchmark)."""
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(REPO / "scripts"))


bench = _script("cost_benchmark")
model = _script("record_model")


def test_a_short_benchmark_reports_gpu_seconds_to_two_percent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "outcomes.json"
    argv = ["--workload", "gpt2", "--seeds", "1", "--budget", "6", "--samplers", "tpe,cost-aware", "--json", str(out)]
    assert bench.main(argv) == 0
    table = capsys.readouterr().out
    assert "| tpe |" in table and "| cost-aware |" in table
    outcomes = json.loads(out.read_text())
    for sweeps in outcomes.values():
        assert len(sweeps) == 1
        for sweep in sweeps:
            assert sweep["measured"] == 6
            assert sweep["trial_s"] > 0
            if sweep["to_best"] is not None:  # GPU seconds and trials, found within the sweep's own time
                seconds, trials = sweep["to_best"]
                assert 0 < seconds <= sweep["trial_s"] + 1e-6 and 1 <= trials <= 6
            assert sweep["to_own"] is not None  # the sweep's own winner is always within 2% of itself


def test_the_summary_line_figure_is_the_record_model_s() -> None:
    """What the benchmark calls the summary line's figure is StudyRecords.time_to_within(0.02), as summarize() uses."""
    import inspect

    from autotune.sweep.stages import summary

    assert "records.time_to_within(0.02)" in inspect.getsource(summary.summarize)
    assert "study.time_to_within(0.02)" in inspect.getsource(bench.run_one)


def test_jittered_landscape_keeps_eager_probes_consistent(tmp_path: Path) -> None:
    path = bench.jittered(bench.WORKLOADS["gpt2"][1], 0.05, seed=3, folder=tmp_path)
    records = {json.dumps(r["params"], sort_keys=True): r for r in json.loads(path.read_text())["records"]}
    for record in records.values():
        if "eager_probe_throughput" in record:
            twin = records[json.dumps({**record["params"], "compile_mode": "none"}, sort_keys=True)]
            assert record["eager_probe_throughput"] == twin["throughput"]


def test_the_modelled_records_are_what_the_model_fits_from_the_real_trials() -> None:
    """The committed record sets are reproducible from scripts/data/h100_trials.json (no hand edits)."""
    data = json.loads(model.TRIALS.read_text())
    for workload in ("gpt2", "resnet50"):
        fitted = model.records_file(model.fit_model(data, workload), workload)
        committed = json.loads(bench.WORKLOADS[workload][1].read_text())
        assert committed["what"].startswith("MODELLED")
        assert len(fitted["records"]) == len(committed["records"])
        for mine, theirs in zip(fitted["records"], committed["records"], strict=True):
            assert mine["params"] == theirs["params"] and mine["status"] == theirs["status"]
            assert math.isclose(mine["duration_s"], theirs["duration_s"], rel_tol=1e-3)
            if mine["status"] == "ok":
                assert math.isclose(mine["throughput"], theirs["throughput"], rel_tol=1e-3)


def test_extract_reads_the_studies_it_is_named(tmp_path: Path) -> None:
    """``extract --study KEY=FOLDER:STUDY`` keeps each named study's measured trials under its key."""
    from recorded_studies import add_trial, make_info, make_study, ok_result

    (tmp_path / "run").mkdir()
    info = make_info()
    study = make_study(tmp_path / "run", info, name="resnet50")
    add_trial(study, info, ok_result(1_000.0, batch_size=64), default=True)
    add_trial(study, info, ok_result(2_500.0, batch_size=128, compile_mode="default"))
    out = tmp_path / "trials.json"
    # make_study writes s.db; extract reads autotune.db, as a sweep names it
    (tmp_path / "run" / "s.db").rename(tmp_path / "run" / "autotune.db")
    argv = ["extract", "--storage-dir", str(tmp_path), "-o", str(out), "--study", "before=run:resnet50"]
    assert model.main([*argv, "--what", "a test"]) == 0
    data = json.loads(out.read_text())
    assert data["what"] == "a test"
    trials = data["studies"]["before"]["trials"]
    assert [t["params"]["batch_size"] for t in trials] == [64, 128]
    assert [t["metrics"]["throughput"] for t in trials] == [1_000.0, 2_500.0]
    with pytest.raises(SystemExit, match="KEY=FOLDER:STUDY"):
        model.main(["extract", "--storage-dir", str(tmp_path), "-o", str(out), "--study", "before=run"])
