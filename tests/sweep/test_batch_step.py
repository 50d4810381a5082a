"""The batch step: the informed start (or its twin, or each where they differ in checkpointing) again at the larger
batch its own measured peak says fits, decided from a real study's records and queued once on it.

The figures are those of GPT-2 under an 8 GiB cap on an H100 (BENCHMARKS.md): the default 8.9 GiB at batch 8, the
informed start (full checkpointing) 2.8 GiB at 8, its twin without checkpointing 5.2 GiB at 8, 1.9 GiB of each
weights, gradients and AdamW state; under 7 GiB the start keeps batch 4 without checkpointing (3.6 GiB).
"""

from __future__ import annotations

import io
from dataclasses import replace
from pathlib import Path
from typing import Any

from expert_facts import CPU, H100
from optuna.trial import TrialState
from recorded_studies import add_trial
from sweep_contexts import sweep_context

from autotune.measurement import Status, TrialResult
from autotune.records import TrialRecord, schema
from autotune.sweep.context import SweepContext
from autotune.sweep.proposals.batch_step import ON_A_CPU, BatchStep, Step, batch_step
from autotune.sweep.proposals.expert_choice import DeviceFacts, expert_params, informed_twin

SPACE = """\
workload: {name: "trial_workloads:tiny_mlp", preset: tiny}
device: cuda
constraints: [peak_mem_gib <= 8]
params:
  batch_size: {choices: [4, 8, 16, 32, 64], ordinal: true, default: 8}
  compile_mode: [none, default]
  activation_checkpointing: [none, selective, full]
"""
GPU = replace(H100, state_gib=1.9)
START = {"batch_size": 8, "compile_mode": "default", "activation_checkpointing": "full"}
TWIN = {**START, "activation_checkpointing": "none"}
TIGHT = SPACE.replace("<= 8", "<= 7")  # the start keeps batch 4 without checkpointing; its twin checkpoints
TIGHT_START, TIGHT_TWIN = {**TWIN, "batch_size": 4}, {**START, "batch_size": 4}


def context(tmp_path: Path, said: io.StringIO) -> SweepContext:
    """A sweep's context over a new SQLite study of SPACE."""
    return sweep_context(tmp_path, SPACE, said, "batch")


def measure(ctx: SweepContext, params: dict[str, Any], tokens_s: float, peak_gib: float, **marks: bool) -> int:
    """Record ``params`` measured at ``tokens_s`` and ``peak_gib``, over the space's 8 GiB cap where it is."""
    metrics = {"throughput": tokens_s, "peak_mem_gib": peak_gib}
    result = TrialResult(Status.OK, None, params, metrics, {"device": "cuda"})
    number = add_trial(ctx.study, ctx.info, result, violation=max(0.0, peak_gib - 8), **marks)
    ctx.records.refresh()
    return number


def with_start(ctx: SweepContext, start_peak: float = 2.8, twin_peak: float = 5.2) -> tuple[int, int]:
    """The default (over the cap), the informed start and its twin measured, as the informed start records them."""
    measure(ctx, ctx.space.default_params(), 257_918, 8.9, default=True)
    start = measure(ctx, START, 279_258, start_peak, informed=True)
    twin = measure(ctx, TWIN, 313_180, twin_peak, twin=True)
    ctx.study.set_user_attr(schema.STUDY_ATTR_INFORMED, {"trial": start, "params": START, "why": "", "twin": twin})
    ctx.records.refresh()
    return start, twin


def with_tight_pair(ctx: SweepContext) -> tuple[int, int]:
    """Under TIGHT: the default, the informed start (3.6 GiB at 4) and its checkpointed twin (2.3 GiB) measured, as
    the informed start records them."""
    measure(ctx, ctx.space.default_params(), 257_918, 8.9, default=True)
    start = measure(ctx, TIGHT_START, 195_655, 3.6, informed=True)
    twin = measure(ctx, TIGHT_TWIN, 150_000, 2.3, twin=True)
    decision = {"trial": start, "params": TIGHT_START, "why": "", "twin": twin}
    ctx.study.set_user_attr(schema.STUDY_ATTR_INFORMED, decision)
    ctx.records.refresh()
    return start, twin


def test_the_twin_without_the_checkpointing_the_expert_turned_on(tmp_path: Path) -> None:
    ctx = context(tmp_path, io.StringIO())
    measure(ctx, ctx.space.default_params(), 257_918, 8.9, default=True)
    default = ctx.records.default
    assert default is not None
    # 8.9 GiB at 8: 0.875 GiB a sample past the state; full keeps 0.7 of it until measured, so 8 fit (6.8 GiB)
    start = expert_params(ctx.space, default, GPU).params
    assert start == START
    assert informed_twin(ctx.space, start, GPU) == TWIN
    assert informed_twin(ctx.space, TWIN, GPU) == START  # left off under the cap: the twin checkpoints
    largest = {**TWIN, "batch_size": 64}
    assert informed_twin(ctx.space, largest, GPU) is None  # the cap held no batch back: nothing to settle
    uncapped = sweep_context(
        tmp_path / "uncapped", SPACE.replace("constraints: [peak_mem_gib <= 8]\n", ""), io.StringIO()
    )
    assert informed_twin(uncapped.space, TWIN, GPU) is None
    assert informed_twin(ctx.space, TWIN, CPU) is None  # no batch step follows on a CPU


def test_the_better_of_the_pair_that_leaves_room_is_stepped(tmp_path: Path) -> None:
    ctx = context(tmp_path, io.StringIO())
    start, _ = with_start(ctx)
    step = batch_step(ctx.space, ctx.records, GPU)
    # the twin ranks first, but 5.2 GiB at 8 leaves no room (16: 8.5 GiB); the start's 2.8 GiB at 8 is 0.1125 GiB a
    # sample: 32 fit (5.5 GiB, within 90% of the cap), 64 would not (9.1 GiB)
    assert isinstance(step, list) and step == [Step({**START, "batch_size": 32}, start, step[0].why)]
    assert f"trial {start}'s peak 2.8 GiB at batch 8" in step[0].why
    assert "about 5.5 GiB at 32" in step[0].why and "peak_mem_gib <= 8" in step[0].why


def test_under_a_tighter_cap_the_twin_checkpoints_and_each_of_the_pair_is_stepped(tmp_path: Path) -> None:
    ctx = sweep_context(tmp_path, TIGHT, io.StringIO(), "tight")
    first, second = with_tight_pair(ctx)
    default = ctx.records.default
    assert default is not None
    # 0.875 GiB a sample past the state: batch 8 would hold 8.9 GiB, and 6.8 with full's cautious 0.7: neither fits
    start = expert_params(ctx.space, default, GPU).params
    assert start == TIGHT_START
    twin = informed_twin(ctx.space, start, GPU)
    assert twin == TIGHT_TWIN  # the peak it cannot reckon, measured at the start's own batch
    steps = batch_step(ctx.space, ctx.records, GPU)
    # without the recompute 0.425 GiB a sample: 8 fits (5.3 GiB), 16 would not; with it 0.1: 32 fits (5.1 GiB)
    assert isinstance(steps, list)
    assert [(step.source, step.params) for step in steps] == [
        (first, {**start, "batch_size": 8}),
        (second, {**twin, "batch_size": 32}),
    ]


def test_no_step_where_nothing_larger_fits_or_on_a_cpu(tmp_path: Path) -> None:
    ctx = context(tmp_path, io.StringIO())
    with_start(ctx, start_peak=6.0, twin_peak=7.0)
    assert batch_step(ctx.space, ctx.records, GPU) == "no larger batch fits by the measured peaks"
    assert batch_step(ctx.space, ctx.records, CPU) == ON_A_CPU
    over = context(tmp_path / "over", io.StringIO())
    with_start(over, start_peak=8.5, twin_peak=9.0)  # both over the cap: neither ranks
    assert "neither the informed start nor its twin ranks" in str(batch_step(over.space, over.records, GPU))


def test_queued_once_after_the_pair_is_measured(tmp_path: Path) -> None:
    said = io.StringIO()
    ctx = context(tmp_path, said)
    asked: list[int] = []

    def device(default: TrialRecord) -> DeviceFacts:
        asked.append(default.number)
        return GPU

    step = BatchStep(ctx, None, "worker", device, on=True)
    step.queue()
    assert schema.STUDY_ATTR_BATCH_STEP not in ctx.study.user_attrs  # the informed start is not decided yet
    start, _ = with_start(ctx)
    step.queue()
    [decision] = ctx.study.user_attrs[schema.STUDY_ATTR_BATCH_STEP]["steps"]
    waiting = ctx.study.get_trials(states=(TrialState.WAITING,))
    assert [t.number for t in waiting] == [decision["trial"]] and decision["source"] == start
    assert waiting[0].system_attrs["fixed_params"] == ctx.space.optuna_params({**START, "batch_size": 32})
    assert f"batch step: trial {decision['trial']} measures trial {start} at batch 32" in said.getvalue()
    assert asked == [0]
    # another worker, or a resumed sweep, finds the decision on the study and queues nothing more
    BatchStep(ctx, None, "other", device, on=True).queue()
    assert len(ctx.study.get_trials(states=(TrialState.WAITING,))) == 1 and asked == [0]


def test_waits_for_the_twin_and_is_off_with_the_informed_start(tmp_path: Path) -> None:
    ctx = context(tmp_path, io.StringIO())
    measure(ctx, ctx.space.default_params(), 257_918, 8.9, default=True)
    start = measure(ctx, START, 279_258, 2.8, informed=True)
    ctx.study.enqueue_trial(ctx.space.optuna_params(TWIN))  # the twin, queued, not measured yet
    ctx.study.set_user_attr(schema.STUDY_ATTR_INFORMED, {"trial": start, "params": START, "why": "", "twin": start + 1})
    ctx.records.refresh()
    BatchStep(ctx, None, "worker", lambda default: GPU, on=True).queue()
    assert schema.STUDY_ATTR_BATCH_STEP not in ctx.study.user_attrs
    off = context(tmp_path / "off", io.StringIO())
    with_start(off)
    BatchStep(off, None, "worker", lambda default: GPU, on=False).queue()
    assert schema.STUDY_ATTR_BATCH_STEP not in off.study.user_attrs
    none = context(tmp_path / "none", io.StringIO())
    none.study.set_user_attr(schema.STUDY_ATTR_INFORMED, {"none": "the default configuration already"})
    BatchStep(none, None, "worker", lambda default: GPU, on=True).queue()
    assert schema.STUDY_ATTR_BATCH_STEP not in none.study.user_attrs


def test_a_cpu_sweep_decides_without_asking_the_device(tmp_path: Path) -> None:
    ctx = sweep_context(tmp_path, SPACE.replace("device: cuda", "device: cpu"), io.StringIO(), "cpu")
    with_start(ctx)

    def device(default: TrialRecord) -> DeviceFacts:
        raise AssertionError("a CPU sweep's batch step asks no trial process")

    BatchStep(ctx, None, "worker", device, on=True).queue()
    assert ctx.study.user_attrs[schema.STUDY_ATTR_BATCH_STEP] == {"none": ON_A_CPU}


def test_each_step_of_a_pair_that_differs_in_checkpointing_is_queued_and_recorded(tmp_path: Path) -> None:
    said = io.StringIO()
    ctx = sweep_context(tmp_path, TIGHT, said, "pair")
    first, second = with_tight_pair(ctx)
    start, twin = TIGHT_START, TIGHT_TWIN
    BatchStep(ctx, None, "worker", lambda default: GPU, on=True).queue()
    steps = ctx.study.user_attrs[schema.STUDY_ATTR_BATCH_STEP]["steps"]
    assert [(step["source"], step["params"]["batch_size"]) for step in steps] == [(first, 8), (second, 32)]
    waiting = ctx.study.get_trials(states=(TrialState.WAITING,))
    assert [t.number for t in waiting] == [step["trial"] for step in steps]
    assert [t.system_attrs["fixed_params"] for t in waiting] == [
        ctx.space.optuna_params({**start, "batch_size": 8}),
        ctx.space.optuna_params({**twin, "batch_size": 32}),
    ]
    for step in steps:
        assert f"batch step: trial {step['trial']} measures trial {step['source']} at batch" in said.getvalue()
