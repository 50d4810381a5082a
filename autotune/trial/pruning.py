"""When a sweep stops a trial early: the pruning line a trial must reach, and what its one-off work can add.

The trial's timing loop consults these rules (the eager probe before the one-off work, the warm-up after it), and a
timed replay decides by the same ones (:mod:`autotune.search.replaytimes`). Plain data, no torch import.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from autotune.numbers import number, quantity

__all__ = [
    "EAGER_ONE_OFF_MS",
    "HOPELESS_MARGIN",
    "KERNELS_AUTOTUNING",
    "PROBE_SPREAD",
    "Pruning",
    "Unreachable",
    "warmup_judge",
]

# The most one-off work an eager step after the first may still hold, with room: in the 87 eager trials recorded on
# H100s and H200s (scripts/data), 82 did none after their first step and 5 did 0.07-0.10 s (ResNet-50 at batch 64,
# GPT-2 at batch 16). So one eager step after the first, less this, already bounds the steady step from below: a
# long hopeless step (2.3 s in fp32 GPT-2) is judged on it, a short one waits for more.
EAGER_ONE_OFF_MS = 250.0
# How far under the pruning line a warm-up must be to stop before its steps settle: even this many times its fastest
# step after the first (compile, autotuning) would stay under it. Eager steps settle within a few percent after
# the first; a slow configuration's settling steps are its most expensive part (GPT-2 in fp32 at batch 128: 2.3 s
# a step, a 16.6 s pruned trial on an H100).
HOPELESS_MARGIN = 2.0
HOPELESS_AFTER = 2  # steps after the first before the warm-up may be judged hopeless
# The one-off work of an eager configuration whose Triton kernels autotune, in a pruned trial's reason (the trial job's
# words, which a replay repeats).
KERNELS_AUTOTUNING = "the kernels' autotuning"
# How far a trial's timed throughput may stand above its eager probe's for reasons other than its kernels'
# autotuning: eager trials' timed figures over their probes' were 0.82-1.094 in the recorded H100 and H200
# trials (scripts/data; cuDNN's search among the reasons).
PROBE_SPREAD = 1.15


@dataclass(frozen=True)
class Unreachable:
    """A probed configuration that cannot reach the pruning line: its eager throughput times the most its one-off
    work can gain (``gain``, ``why`` in words) is ``reachable``, under ``below``; ``basis`` says what the line is."""

    gain: float
    why: str
    reachable: float
    below: float
    basis: str | None = None

    def reason(self, work: str, eager: str) -> str:
        """The pruned trial's reason, ``work`` (the one-off work not paid) and ``eager`` (the probe's figure) in
        words: ``before compiling: eager 1,000 images/s x 1.50 (...) = 1,500 is below 2,000 (0.5 x trial 4's ...)``."""
        return (
            f"before {work}: {eager} x {self.gain:.2f} ({self.why}) = {number(self.reachable)} "
            f"is below {number(self.below)}"
            f"{_basis(self.basis)}"
        )


@dataclass(frozen=True)
class Pruning:
    """When a sweep stops a trial early: the throughput a trial must reach, and what its one-off work can add.

    ``below``: a trial whose settled warm-up throughput is under it stops there (status pruned); None
    before the sweep has a best. ``compile_gain``: the most the first steps' one-off work (a compile, cuDNN's
    algorithm search, the workload's kernels autotuning) may multiply a configuration's eager throughput by in
    this study (:mod:`autotune.sweep.proposals.compile_pruning`); None until the study has measured enough probed trials
    to say. A trial with such work, given a ``Pruning``, first times a few steps of its eager twin without cuDNN's
    search and with its kernels on their first configs (:mod:`autotune.trial.eagerprobe`): that figure is recorded
    either way, and a configuration whose eager throughput times the most its work can gain (:meth:`one_off_gain`)
    cannot reach ``below`` stops before that work.
    """

    below: float | None = None
    compile_gain: float | None = None
    basis: str | None = None  # what ``below`` is, for the pruned trial's reason: "0.5 x trial 12's 341.8, ..."

    def one_off_gain(self, autotuning_share: float | None = None) -> tuple[float, str] | None:
        """The most the first steps' one-off work may multiply a probe's throughput by, and why, in words; None while
        nothing bounds it.

        ``compile_gain``, or, for a configuration whose only one-off work is its kernels' autotuning, what
        ``autotuning_share`` (the share of the probe's steps those kernels took on their first configs) allows,
        whichever is lower: were the kernels free, the step would take the rest (Amdahl's law), and
        :data:`PROBE_SPREAD` covers the probe's own error.
        """
        bounds = []
        if self.compile_gain is not None:
            bounds.append(
                (self.compile_gain, "the most the first steps' one-off work gained in this study, with margin")
            )
        if autotuning_share is not None:
            amdahl = PROBE_SPREAD / max(1.0 - autotuning_share, 1e-3)
            why = f"the most autotuning can gain where the kernels took {autotuning_share:.1%} of the probe's steps"
            bounds.append((amdahl, f"{why}, with margin"))
        return min(bounds, default=None)

    def unreachable(self, eager_throughput: float, autotuning_share: float | None = None) -> Unreachable | None:
        """How a configuration whose eager twin ran at ``eager_throughput`` cannot reach the line even with the most
        its one-off work can gain (:meth:`one_off_gain`; ``autotuning_share`` for one whose only one-off work is its
        kernels' autotuning); None where it may, or nothing bounds the gain or draws the line. The trial job and a
        timed replay both decide by it."""
        bound = self.one_off_gain(autotuning_share)
        if self.below is None or bound is None:
            return None
        gain, why = bound
        reachable = eager_throughput * gain
        return Unreachable(gain, why, reachable, self.below, self.basis) if reachable < self.below else None

    def before_work(self, work: str, eager_throughput: float, autotuning_share: float | None) -> Unreachable | None:
        """:meth:`unreachable` for a configuration whose first steps would pay ``work`` (in words): the share of its
        probe's steps that its autotuning kernels took (``autotuning_share``) bounds only the kernels' autotuning
        (``work`` is :data:`KERNELS_AUTOTUNING`), never a compile's or cuDNN's search's gain. The trial's eager probe
        and a timed replay both decide by it."""
        return self.unreachable(eager_throughput, autotuning_share if work == KERNELS_AUTOTUNING else None)

    def after_warmup(self, throughput: float, unit: str = "") -> str | None:
        """Why a trial whose settled warm-up ran at ``throughput`` (``unit`` for the reason) stops there: it is under
        the line; None where it goes on to be timed. The trial job and a timed replay both decide by it."""
        if self.below is None or throughput >= self.below:
            return None
        shown = quantity(throughput, unit)
        return f"warm-up throughput {shown} is below {number(self.below)}{_basis(self.basis)}"


def warmup_judge(
    pruning: Pruning | None, items: int, *, eager: bool, cudagraphs: bool, behind_loader: bool
) -> Callable[[list[float]], bool] | None:
    """Whether the warm-up's steps so far (ms each) already put a configuration of ``items`` a step out of the
    pruning line's reach; ``eager``: nothing compiled.

    None where the sweep does not prune; ``behind_loader``, whose first steps wait for its workers to start; and
    where the step runs in CUDA graphs (``cudagraphs``): their first calls run eager to warm up, then record (cuDNN's
    search too), over more steps than the first. On an H100 a ResNet-50 ``reduce-overhead`` trial's two steps after
    the first ran at 1,289-1,558 images/s, a fifth to a quarter of its default-mode twin's 5,890, and it was pruned on
    them; in the recorded H100 trials, CUDA-graph steps did up to 16 steady steps' worth of one-off work after their
    first step, other modes under 4. An eager step may be judged one step after the first, less
    :data:`EAGER_ONE_OFF_MS`.
    """
    below = pruning.below if pruning else None
    if below is None or behind_loader or cudagraphs:
        return None

    def hopeless(times: list[float]) -> bool:
        after_first = times[1:]
        if len(after_first) >= HOPELESS_AFTER:
            fastest_ms = min(after_first)
        elif eager and after_first:
            fastest_ms = after_first[0] - EAGER_ONE_OFF_MS
        else:
            return False
        return fastest_ms > 0 and items / (fastest_ms / 1e3) * HOPELESS_MARGIN < below

    return hopeless


def _basis(basis: str | None) -> str:
    """`` (0.5 x trial 12's 341.8, one measurement)``: what the pruning line is, where the sweep said."""
    return f" ({basis})" if basis else ""
