"""What a sweep hands a trial about pruning: the most a configuration's one-off work may gain over its eager probe."""

from __future__ import annotations

import pytest

from autotune.jobspec import PROBE_SPREAD, Pruning


def test_the_lower_of_the_studys_gain_and_the_kernels_share_bounds_an_autotuning_trial() -> None:
    learnt = Pruning(below=100.0, compile_gain=1.5)
    assert learnt.one_off_gain(None) == (
        1.5,
        "the most the first steps' one-off work gained in this study, with margin",
    )
    small = learnt.one_off_gain(0.1)  # were the kernels free, the step would take 0.9 of its time
    assert small is not None and small[0] == pytest.approx(PROBE_SPREAD / 0.9)
    assert small[1] == "the most autotuning can gain where the kernels took 10.0% of the probe's steps, with margin"
    large = learnt.one_off_gain(0.5)  # the kernels could gain 2.3x: the study's bound is the lower
    assert large is not None and large[0] == 1.5


def test_the_kernels_share_bounds_before_the_study_has_learnt_a_gain() -> None:
    assert Pruning(below=100.0).one_off_gain(None) is None
    alone = Pruning(below=100.0).one_off_gain(0.2)
    assert alone is not None and alone[0] == pytest.approx(PROBE_SPREAD / 0.8)
    whole = Pruning(below=100.0).one_off_gain(1.0)  # a step that is all kernel: no bound worth the name
    assert whole is not None and whole[0] >= 1_000
