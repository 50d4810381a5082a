"""Which trials a profile compares: the ok PyTorch-default trial and the leaderboard's rank 1, or a clear refusal.

The studies are real (sqlite), recorded the way a sweep records trials (helpers of test_leaderboard).
Running the two trials under the profiler is tested end to end in test_profile_command.
"""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest
from recorded_studies import add_trial, failed, make_info, make_study, ok_result

from autotune.errors import AutotuneError
from autotune.measurement import Status
from autotune.views.profile_study import pick_trials, space_of

REPO = Path(__file__).resolve().parents[2]


def test_the_winner_is_rank_one_after_re_measuring(tmp_path: Path) -> None:
    info = make_info()
    study = make_study(tmp_path, info)
    add_trial(study, info, ok_result(2000.0, batch_size=128), default=True)
    lucky = add_trial(
        study, info, ok_result(9000.0, batch_size=512), remeasured={"metric": "throughput", "median": 5000.0}
    )
    steady = add_trial(study, info, ok_result(6000.0, batch_size=256))
    default, winner = pick_trials(study, info)
    assert default.trial == 0 and default.default
    assert winner.trial == steady != lucky  # the lucky first measurement did not hold up
    assert winner.params["batch_size"] == 256


def test_a_failed_default_leaves_nothing_to_compare_against(tmp_path: Path) -> None:
    info = make_info()
    study = make_study(tmp_path, info)
    add_trial(study, info, failed(Status.OOM, "CUDA out of memory"), default=True)
    add_trial(study, info, ok_result(6000.0))
    with pytest.raises(AutotuneError, match=r"PyTorch-default trial 0 .* did not succeed \(oom: CUDA out of memory\)"):
        pick_trials(study, info)


def test_a_study_without_a_default_or_a_winner_is_refused(tmp_path: Path) -> None:
    info = make_info()
    study = make_study(tmp_path, info)
    add_trial(study, info, ok_result(6000.0))
    with pytest.raises(AutotuneError, match="no measured PyTorch-default trial"):
        pick_trials(study, info)
    other = make_study(tmp_path, info, name="infeasible")
    add_trial(other, info, ok_result(2000.0), default=True, violation=1.0)  # broke a metric constraint
    with pytest.raises(AutotuneError, match="no winner"):
        pick_trials(other, info)


def test_a_kernel_workload_has_no_training_step_to_profile(tmp_path: Path) -> None:
    info = make_info(workload="triton_matmul")
    study = make_study(tmp_path, info)
    with pytest.raises(AutotuneError, match=r"kernel workload \(triton_matmul\)"):
        pick_trials(study, info)


def test_the_space_comes_from_the_study_not_the_file(tmp_path: Path) -> None:
    text = (REPO / "search_spaces" / "quick.yaml").read_text()
    info = make_info()
    info = type(info)("resnet50", "tiny", "cpu", str(tmp_path / "gone" / "quick.yaml"), text, info.objectives)
    space = space_of(info)
    assert space.workload.name == "resnet50" and space.text == text


optuna.logging.set_verbosity(optuna.logging.WARNING)
