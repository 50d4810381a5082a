"""How much the first steps' one-off work can gain in this study: what lets a trial be pruned before it pays it.

Every compiled trial of a sweep times a few eager steps of its own configuration before compiling
(:mod:`autotune.trial.eagerprobe`) and records them as ``eager_probe_throughput``; once it has compiled
and warmed up, its throughput over that figure is what compiling gained for it. The bound a new
trial is given is the largest such gain among the study's probed trials, times a margin, and only
once a few have said: until then nothing is pruned before compiling. A configuration whose eager
throughput times the bound stays under the pruning line cannot win; every other one compiles.

cuDNN's algorithm search (``cudnn_benchmark=true``) is one-off work of the same kind: on an H100 the first
steps of ResNet-50 in fp32, channels_last, batch 512 searched for 160 s before the trial was pruned at a sixth
of the best. The probe runs without it (cuDNN picks by its heuristics), so an eager configuration that asks for
the search is probed too, and what the search gained counts as evidence beside what compiling gained: one
bound for the first steps' one-off work, whichever it is. The workload's ``triton.autotune`` kernels autotuning
their configs is a third kind (the probe runs their first configs): only the trial's process knows its kernels,
so every configuration is handed a bound, and the trial probes where it has one-off work to skip. A compiled (or
cuDNN-searching) configuration's bound comes from the trials that compiled or searched; an eager one's whose kernels
autotune, from every probed trial (:func:`compile_gain_bound`). Such a trial also bounds its kernels' gain itself,
from the share of its probe's steps they took (:meth:`autotune.trial.pruning.Pruning.one_off_gain`), and the lower
bound counts.

The gains of every compile mode are pooled: a sweep compiles a few dozen times, and a bound per mode
would wait for evidence until the sweep is half over. The margin covers what pooling can miss (CUDA
graphs gain most where launches dominate: small batches). With a gain of 2x seen, the bound is 3x,
and with the pruning line at half the best only configurations whose eager figure is under a sixth
of the best stop before compiling.

The bound is per study and learnt from its own trials: no model's or GPU's figure is assumed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from autotune.measurement import Status, TrialResult
from autotune.numbers import number
from autotune.search.costmodel import pays_one_off_work
from autotune.sweep.context import SweepContext
from autotune.trial.pruning import Pruning

__all__ = ["GAIN_MARGIN", "MIN_EVIDENCE", "compile_gain_bound", "pruning_for"]

# A configuration's gain can exceed every one seen so far (a smaller batch, where launches dominate,
# gains more); the margin keeps the bound above that, and only clearly hopeless ones go unmeasured.
GAIN_MARGIN = 1.5
MIN_EVIDENCE = 2  # probed trials with their measured figure before the bound is trusted


def compile_gain_bound(params: dict[str, Any], results: Iterable[TrialResult]) -> float | None:
    """The most the first steps' one-off work may multiply ``params``' probe throughput by, judged from ``results``;
    None (unknown) for too little evidence.

    A configuration that compiles or searches cuDNN's algorithms is judged by the trials that did one or the other:
    an eager trial whose only one-off work was its kernels' autotuning gained 0.97-1.01 in an H200 GPT-2 sweep,
    where compiling gained up to 1.73, and would set too low a bound for a compile. An eager configuration whose
    kernels autotune is judged by every probed trial: a compile's gain bounds the autotuning's from above.
    """
    compiles = pays_one_off_work(params)
    evidence = (result for result in results if not compiles or pays_one_off_work(result.params))
    gains = [gain for result in evidence if (gain := _gain(result)) is not None]
    if len(gains) < MIN_EVIDENCE:
        return None
    return max(1.0, *gains) * GAIN_MARGIN


def _gain(result: TrialResult) -> float | None:
    """A probed trial's throughput over its probe's; None for any other trial."""
    if result.status not in (Status.OK, Status.PRUNED):
        return None
    metrics = result.metrics
    if metrics.get("pruned_before_compile"):
        return None  # its throughput is the bound it was pruned on, not a measurement
    eager, compiled = metrics.get("eager_probe_throughput"), metrics.get("throughput")
    if not isinstance(eager, int | float) or not isinstance(compiled, int | float) or eager <= 0:
        return None
    return float(compiled) / float(eager)


def pruning_for(ctx: SweepContext, params: dict[str, Any]) -> Pruning | None:
    """When the trial of ``params`` stops early: under ``--prune-below`` times the study's winner after warm-up
    or, where this study's one-off gains say it cannot get there, before its one-off work (a compile, cuDNN's search,
    its kernels' autotuning). None where pruning is off or the objective is not one throughput to maximize."""
    objectives, ratio = ctx.info.objectives, ctx.options.prune_ratio
    if not ratio or len(objectives) > 1 or objectives[0] != ("throughput", "maximize"):
        return None
    winner = ctx.records.winner
    measured = (record.result for record in ctx.records.measured if record.result is not None)
    gain = compile_gain_bound(params, measured)
    if winner is None or winner.value is None:
        return Pruning(None, gain)
    basis = f"{ratio:g} x trial {winner.number}'s {number(winner.value)}, {winner.value_is}"
    return Pruning(ratio * winner.value, gain, basis)
