"""What a sweep hands a trial about pruning: the most a configuration's one-off work may gain over its eager probe, and
the decisions (and their reasons) that the trial job and a timed replay both take from it."""

from __future__ import annotations

import pytest

from autotune.trial.pruning import PROBE_SPREAD, Pruning


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


def test_a_probe_cannot_win_only_when_even_the_largest_gain_stays_under_the_line() -> None:
    line = Pruning(below=151.0, compile_gain=1.5, basis="0.5 x trial 4's 302, one measurement")
    unreachable = line.unreachable(100.0)
    assert unreachable is not None and unreachable.reachable == pytest.approx(150.0)
    assert unreachable.reason("compiling", "eager 100 images/s") == (
        "before compiling: eager 100 images/s x 1.50 (the most the first steps' one-off work gained in this study, "
        "with margin) = 150 is below 151 (0.5 x trial 4's 302, one measurement)"
    )
    assert Pruning(below=150.0, compile_gain=1.5).unreachable(100.0) is None  # it could just reach the line
    assert Pruning(compile_gain=1.5).unreachable(1.0) is None  # no line yet
    assert Pruning(below=151.0).unreachable(100.0) is None  # nothing bounds the gain yet
    kernels = Pruning(below=151.0).unreachable(100.0, autotuning_share=0.1)  # 1.15 / 0.9: 127.8 at most
    assert kernels is not None and kernels.gain == pytest.approx(PROBE_SPREAD / 0.9)


def test_a_warm_up_under_the_line_says_so_and_one_on_it_goes_on() -> None:
    line = Pruning(below=2_000.0, basis="0.5 x trial 1's 4,000, one measurement")
    assert line.after_warmup(1_990.0, "images/s") == (
        "warm-up throughput 1,990 images/s is below 2,000 (0.5 x trial 1's 4,000, one measurement)"
    )
    assert Pruning(below=2_000.0).after_warmup(1_000.0) == "warm-up throughput 1,000 is below 2,000"
    assert line.after_warmup(2_000.0) is None
    assert Pruning().after_warmup(1.0) is None
