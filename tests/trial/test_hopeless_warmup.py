"""When a trial's warm-up may stop before its steps settle: steps after the first that leave it out of reach."""

from __future__ import annotations

from collections.abc import Callable

from autotune.trial.pruning import EAGER_ONE_OFF_MS, HOPELESS_MARGIN, Pruning, warmup_judge

ITEMS = 1_000  # items per step: batch 1_000 of a one-item-per-sample workload


def _hopeless(
    pruning: Pruning | None,
    *,
    cudagraphs: bool = False,
    behind_loader: bool = False,
    compile_mode: str = "none",
) -> Callable[[list[float]], bool] | None:
    """The warm-up's judge for a configuration of ``ITEMS`` a step."""
    eager = compile_mode == "none"
    return warmup_judge(pruning, ITEMS, eager=eager, cudagraphs=cudagraphs, behind_loader=behind_loader)


# 1,000 items a step: a 100 ms step is 10,000 items/s; under the line even at twice that speed.
LINE = Pruning(below=2 * 10_000 * 1.01)
SLOW_STEPS = [5_000.0, 100.0, 100.0]


def test_two_steps_after_the_first_out_of_reach_end_an_eager_warm_up() -> None:
    hopeless = _hopeless(LINE)
    assert hopeless is not None
    assert not hopeless(SLOW_STEPS[:2])  # one step after the first says too little
    assert hopeless(SLOW_STEPS)
    within_reach = _hopeless(Pruning(below=HOPELESS_MARGIN * 10_000 * 0.99))
    assert within_reach is not None and not within_reach(SLOW_STEPS)


# A long step: 1,000 items in 2 s, so even the step less the eager allowance, at twice the speed, stays under this line.
LONG_STEPS = [9_000.0, 2_000.0]
LONG_LINE = Pruning(below=1.01 * HOPELESS_MARGIN * ITEMS / ((2_000.0 - EAGER_ONE_OFF_MS) / 1e3))


def test_one_long_eager_step_after_the_first_ends_a_hopeless_warm_up() -> None:
    # Eager steps after the first hold at most ~0.1 s of one-off work: a 2 s step less the allowance bounds it.
    hopeless = _hopeless(LONG_LINE)
    assert hopeless is not None
    assert not hopeless(LONG_STEPS[:1])  # the first step alone says nothing
    assert hopeless(LONG_STEPS)
    just_within = Pruning(below=0.99 * HOPELESS_MARGIN * ITEMS / ((2_000.0 - EAGER_ONE_OFF_MS) / 1e3))
    within_reach = _hopeless(just_within)
    assert within_reach is not None and not within_reach(LONG_STEPS)


def test_a_compiled_step_waits_for_two_steps_after_the_first() -> None:
    # Compiled steps may still autotune or recompile after their first step: one step is not enough evidence.
    hopeless = _hopeless(LONG_LINE, compile_mode="default")
    assert hopeless is not None
    assert not hopeless(LONG_STEPS)
    assert hopeless([*LONG_STEPS, 2_000.0])


def test_a_step_in_cuda_graphs_is_never_judged_on_its_first_steps() -> None:
    # Its first calls warm up and record the graphs: on an H100 a ResNet-50 reduce-overhead trial's steps two and
    # three ran at a fifth to a quarter of its default-mode twin's speed.
    assert _hopeless(LINE, cudagraphs=True) is None


def test_no_judgement_without_a_line_or_behind_a_loader() -> None:
    assert _hopeless(None) is None
    assert _hopeless(Pruning(below=None)) is None
    assert _hopeless(LINE, behind_loader=True) is None
