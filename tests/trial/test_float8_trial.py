"""A float8 trial on a CPU (torchao's emulated FP8), in its own process as a sweep runs it, and production's
``apply()`` from its exported file converting the very layers it converted."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml
from recorded_studies import add_trial, make_info, make_study
from trial_workloads import wide_layers

import autotune
from autotune.measurement import Status, TrialResult
from autotune.trial.numerics import FLOAT8_LOSS_TOLERANCE
from autotune.trial.trialspec import MeasureSettings, TrialSpec
from autotune.trial_process import TrialRunner
from autotune.views.export import export

FAST = MeasureSettings(min_warmup_steps=2, min_steps=5, min_time_s=0.05, max_warmup_s=5)
PARAMS = {"precision": "bf16", "float8": "rowwise_with_gw_hp", "float8_filter": "include=*;exclude=narrow"}


@pytest.fixture(scope="module")
def trial() -> TrialResult:
    spec = TrialSpec("trial_workloads:wide_mlp", dict(PARAMS), preset="tiny", device="cpu", measure=FAST)
    return TrialRunner().run(spec, 300)


def test_a_float8_trial_runs_and_its_record_says_what_it_converted(trial: TrialResult) -> None:
    assert trial.status is Status.OK, trial.reason
    assert {name: trial.params[name] for name in PARAMS} == PARAMS
    assert trial.metrics["float8_layers"] == 3 and trial.extra["float8_layers"] == ["up", "mix", "lm_head"]
    assert 0.0 <= trial.metrics["loss_rel_error"] <= FLOAT8_LOSS_TOLERANCE
    assert "float8" not in str(trial.metrics.get("noop_knobs", ""))


def test_apply_from_the_exported_file_converts_the_trials_layers(trial: TrialResult, tmp_path: Path) -> None:
    info = make_info(workload="trial_workloads:wide_mlp")
    study = make_study(tmp_path, info)
    add_trial(study, info, trial)
    path = tmp_path / "tuned.yaml"
    export(study, info, path)
    knobs = yaml.safe_load(path.read_text())["knobs"]
    assert knobs["float8"] == "rowwise_with_gw_hp"
    assert knobs["float8_filter"] == {"include": ["*"], "exclude": ["narrow"]}  # the recipe and filter, recorded

    model = wide_layers()
    cfg = autotune.load(path)
    applied, step_ctx = cfg.apply(model, torch.optim.AdamW(model.parameters()), device_type="cpu")
    assert step_ctx.float8_layers is not None and list(step_ctx.float8_layers) == trial.extra["float8_layers"]
    assert {name for name, m in applied.named_modules() if type(m).__name__ == "Float8Linear"} == set(
        trial.extra["float8_layers"]
    )
