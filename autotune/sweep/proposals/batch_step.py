"""The batch step: once the informed start and its twin are measured, the better of them (or each, where they differ
in activation checkpointing) again at the larger batch its own measured peak says will fit.

The informed start's batch is reckoned from the PyTorch default's peak (:func:`expert_choice.largest_batch`), which
knows nothing of what the expert's own choices save: a fused head that never holds the logits, the compiler's fusions,
what checkpointing keeps of this model. So it errs small. On an H100 (BENCHMARKS.md), GPT-2's informed start under an
8 GiB cap was reckoned from the default's 8.9 GiB at batch 8 and held 2.8 GiB at batch 8; a Llama 1B decoder's held
35.0 of the GPU's 79.2 GiB at batch 4. Measured, a trial's own peak is the better yardstick, and an engineer who saw
those peaks would try a larger batch next. So the sweep queues that trial, once per study: the same configuration
at the largest batch of the space that the trial's peak, scaled with the batch, says fits within the device's memory,
``--memory-cap`` and every ``peak_mem_gib`` constraint (the same reckoning and headroom as the informed start's).

Of the informed start and its twin, the better-ranked one that leaves room is stepped. Where the two differ in
activation checkpointing (:func:`expert_choice.checkpointing_twin`), each that leaves room is: at one batch the one
without the recompute ranks first, and what the pair settles is whether the larger batch that checkpointing lets fit
gains more than the recompute costs. Under 8 GiB on that H100, GPT-2's checkpointed start went from batch 8 to 32:
217,957 to 417,261 tokens/s. None where neither leaves room, on a CPU (its peak is the process's, not the batch's),
or where the informed start is off. A step counts in the budget like any trial; the study records the decision
(``autotune.batch_step``), so other workers and a resumed sweep take it once. A trial that turns out over a
constraint is measured, marked infeasible and never ranked.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from autotune.records import StudyRecords, TrialRecord, schema
from autotune.space import Space
from autotune.sweep.context import SweepContext
from autotune.sweep.proposals.expert_choice import DeviceFacts, largest_batch
from autotune.sweep.proposals.informed_start import ProbeFailed, last_queued
from autotune.sweep.workers.leases import LeaseTable, decide_once

__all__ = ["ON_A_CPU", "BatchStep", "Step", "batch_step"]

LEASE = "batch step"  # the study's lease held by the worker that decides it
ON_A_CPU = "on a CPU the batch stays: a CPU process's peak is the whole process's, not the batch's"


@dataclass(frozen=True)
class Step:
    """The configuration the batch step measures: ``params``, trial ``source``'s at a larger batch, and ``why``."""

    params: dict[str, Any]
    source: int
    why: str


def batch_step(
    space: Space, records: StudyRecords, facts: DeviceFacts, memory_cap_gib: float | None = None
) -> list[Step] | str:
    """The batch steps for the study's measured informed start and twin, best-ranked source first (see the module
    docstring), or why there is none."""
    spec = space.params.get("batch_size")
    if spec is None or spec.kind == "fixed":
        return "the space does not search batch_size"
    if not facts.gpu:
        return ON_A_CPU
    ranked = [record for record in records.ranked if record.informed or record.twin]  # the record model's order
    if not ranked:
        return "neither the informed start nor its twin ranks (failed, or over a constraint)"
    each = len({record.params.get("activation_checkpointing", "none") for record in ranked}) > 1
    steps: list[Step] = []
    for record in ranked:
        batch = record.params.get(spec.name)
        larger, how = largest_batch(spec, record, facts, space, False, memory_cap_gib)
        if not (isinstance(batch, int) and isinstance(larger, int) and larger > batch and how is not None):
            continue
        params = {**record.params, spec.name: larger}
        if records.measured_with(params) is None and space.is_feasible(params)[0]:
            steps.append(Step(params, record.number, how))
            if not each:
                break
    return steps or "no larger batch fits by the measured peaks"


class BatchStep:
    """One worker's part in the study's batch step: :meth:`queue` before each ask."""

    def __init__(
        self,
        ctx: SweepContext,
        leases: LeaseTable | None,
        worker: str,
        device: Callable[[TrialRecord], DeviceFacts],
        on: bool,
    ) -> None:
        self.ctx = ctx
        self.leases = leases
        self.worker = worker
        self.device = device  # the device's facts, as the informed start asked them (once per worker)
        self._settled = not on

    def queue(self) -> None:
        """Once the informed start and its twin are measured: decide the batch step, unless the study holds that
        decision already or another worker is taking it now (then look again at the next ask)."""
        if self._settled:
            return
        decision = self.ctx.study.user_attrs.get(schema.STUDY_ATTR_INFORMED)
        if decision is None:
            return  # the informed start is not decided yet
        if "trial" not in decision:
            self._settled = True  # no informed start: nothing to step from
            return
        pending = [decision["trial"], *([decision["twin"]] if "twin" in decision else [])]
        if not all(_finished(self.ctx.records, number) for number in pending):
            return
        self._settled = decide_once(self.leases, LEASE, self.worker, self._decided, self._decide)

    def _decided(self) -> bool:
        self.ctx.records.refresh()
        return schema.STUDY_ATTR_BATCH_STEP in self.ctx.study.user_attrs

    def _decide(self) -> None:
        ctx = self.ctx
        default = ctx.records.default
        if default is None:
            return
        if (ctx.options.device or ctx.space.device) == "cpu":
            self._record({"none": ON_A_CPU})  # known without asking the device (a trial process)
            return
        try:
            facts = self.device(default)
        except ProbeFailed as exc:
            self._record({"none": f"the device could not be asked: {exc}"})
            return
        steps = batch_step(ctx.space, ctx.records, facts, ctx.options.memory_cap_gib)
        if isinstance(steps, str):
            self._record({"none": steps})
            return
        queued = []
        for step in steps:
            ctx.study.enqueue_trial(ctx.space.optuna_params(step.params))
            number = last_queued(ctx.study)
            queued.append({"trial": number, "source": step.source, "params": step.params, "why": step.why})
            batch = step.params.get("batch_size")
            ctx.progress.message(
                f"batch step: trial {number} measures trial {step.source} at batch {batch} ({step.why})"
            )
        self._record({"steps": queued})

    def _record(self, decision: dict[str, Any]) -> None:
        self.ctx.study.set_user_attr(schema.STUDY_ATTR_BATCH_STEP, decision)


def _finished(records: StudyRecords, number: int) -> bool:
    """Whether trial ``number`` has ended (measured, or answered without a run) as of the records' last refresh."""
    try:
        return records.trial(number).state.is_finished()
    except KeyError:
        return False  # queued after the last refresh
