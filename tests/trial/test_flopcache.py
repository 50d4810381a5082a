"""A step's model FLOPs counted once per study and model shape, read back by the trials after it."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from flop_models import ReadsBack, mlp_workload
from torch.nn import functional as F

from autotune.trial.flopcache import FOLDER, FlopCache
from autotune.trial.flops import FlopCount, count_step_flops
from autotune.trial.trialspec import MeasureSettings, TrialSpec
from autotune.trial_process import TrialRunner
from autotune.workloads import Workload

MODEL = {"workload": "mlp", "preset": "tiny", "arguments": {}, "seed": 0}


def test_the_first_count_is_kept_and_read_back_for_the_same_model_and_batch(tmp_path: Path) -> None:
    cache = FlopCache(tmp_path / FOLDER, MODEL)
    work, batch = mlp_workload(batch=8)
    assert cache.count(work, batch) == count_step_flops(work, batch)
    [kept] = (tmp_path / FOLDER).iterdir()
    kept.write_text(json.dumps({"flops": 123.0, "reason": None}))  # read back, not counted again
    assert cache.count(work, batch) == FlopCount(123.0)


def test_another_batch_shape_or_model_is_counted_anew(tmp_path: Path) -> None:
    cache = FlopCache(tmp_path / FOLDER, MODEL)
    work, small = mlp_workload(batch=4)
    _, large = mlp_workload(batch=12)
    wider, _ = mlp_workload()
    wider.model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 20))
    counts = [cache.count(work, small), cache.count(work, large), cache.count(wider, small)]
    assert len({count.flops for count in counts}) == 3
    assert FlopCache(tmp_path / FOLDER, {**MODEL, "seed": 1}).count(work, small) == counts[0]
    assert len(list((tmp_path / FOLDER).iterdir())) == 4  # by batch shape, model and spec: each its own file


def test_a_count_that_could_not_be_made_is_kept_with_its_reason(tmp_path: Path) -> None:
    cache = FlopCache(tmp_path / FOLDER, MODEL)
    batch = (torch.randn(3, 4), torch.randint(0, 2, (3,)))
    work = Workload(ReadsBack(), lambda size, device: batch, F.cross_entropy)
    first = cache.count(work, batch)
    assert first.flops is None and first.reason and cache.count(work, batch) == first
    assert len(list((tmp_path / FOLDER).iterdir())) == 1


def test_an_unreadable_or_unwritable_cache_counts_as_without_one(tmp_path: Path) -> None:
    work, batch = mlp_workload()
    expected = count_step_flops(work, batch)
    cache = FlopCache(tmp_path / FOLDER, MODEL)
    assert cache.count(work, batch) == expected
    [kept] = (tmp_path / FOLDER).iterdir()
    kept.write_text("{half a fi")
    assert cache.count(work, batch) == expected  # counted again, and kept whole
    assert json.loads(kept.read_text())["flops"] == expected.flops
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    assert FlopCache(blocked / FOLDER, MODEL).count(work, batch) == expected  # no folder can be made there


def test_trials_of_a_study_share_the_count_in_its_folder(tmp_path: Path) -> None:
    measure = MeasureSettings(min_warmup_steps=1, settle_window=2, min_steps=3, min_time_s=0.05, max_steps=5)
    runner = TrialRunner(compiles=False)

    def trial(batch_size: int) -> float:
        params = {"batch_size": batch_size}
        spec = TrialSpec("gpt2", params, "tiny", "cpu", measure=measure, compile_cache_dir=str(tmp_path))
        result = runner.run(spec, 120)
        assert result.ok, result.reason
        return float(result.metrics["model_flops_per_step"])

    first = trial(4)
    [kept] = (tmp_path / FOLDER).iterdir()
    kept.write_text(json.dumps({"flops": first * 10, "reason": None}))
    assert trial(4) == first * 10  # the second trial of that shape read the study's count
    assert trial(8) == 2 * first  # another batch size: counted, not read
