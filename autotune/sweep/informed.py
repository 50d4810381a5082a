"""The informed start: after the PyTorch default, the configuration an expert would try first on this device.

A sampler's first trials are random (TPE's first ten), and a random draw of six knobs rarely lands on
the combination that wins: a 12-trial GPT-2 sweep never tried bf16 with the fused head (BENCHMARKS.md).
An engineer would have tried it first. So once the default trial is measured, the sweep queues one
configuration that an expert would pick for this device and workload, and the next ask measures it
(the study's second trial with one worker). It is a measured trial like any other: it counts in the
budget, the sampler reads it as a COMPLETE trial (TPE models it; CMA-ES, which learns only from its
own draws, does not), and it is marked ``autotune.informed`` so the progress line names it.

What it picks, each only where the space offers the value (a knob the space fixes or does not search
keeps its value; a ``when:`` is respected; other params keep the default's, and the space's listed kernels take
what their own autotuners choose in a short eager run of this configuration, :mod:`autotune.sweep.kernelstart`):

- on a GPU: bf16 autocast where the GPU has it, else fp16 (else TF32); channels_last where the model
  has 4-D weights; ``torch.compile`` default; the fused optimizer; cuDNN benchmark; pinned batches,
  ``non_blocking`` copies and 4 loader workers; the workload's own choices where it names them (its
  build function's ``informed_start`` mapping: gpt2's fused LM head); and the largest batch whose
  memory the default's measured peak says will fit (:func:`largest_batch`);
- on a CPU: ``torch.compile`` default and the fused optimizer; channels_last for 4-D weights; bf16
  only where the CPU has AMX tiles (``amx_bf16``: elsewhere autocast to bf16 converts more than it
  saves, and fp16 autocast on a CPU is slower still); the default's batch (a CPU process's peak is
  its whole resident memory, not the batch's, and a CPU does not speed up with a larger batch as a
  GPU does); no Triton kernels (they need a GPU).

What the device is (its GPU, memory, bf16; whether the model has 4-D weights, asked of the workload
built on the ``meta`` device: no memory, no weights) is asked in a trial process, as a trial would
see it: the sweep's process never touches CUDA nor runs the workload's code.

Once per study: the worker that finds the default measured takes the study's ``informed start`` lease,
decides, queues the trial (or notes why none) on the study (``autotune.informed_start``), and the
others, and a resumed sweep, find that decision there. Off with ``--no-informed-start``; not under
``--replay`` (recorded measurements have no device to ask) nor with the grid sampler (it measures
every point anyway).
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from typing import Any

from optuna.trial import TrialState

from autotune.interrupts import StopSignals
from autotune.records import TrialRecord, schema
from autotune.records.trial import finite, is_informed
from autotune.results import Status
from autotune.runner import TrialRunner
from autotune.space import Space
from autotune.space.params import ParamSpec
from autotune.sweep.context import SweepContext
from autotune.sweep.kernelstart import autotuned_kernel_params
from autotune.sweep.lease import LeaseTable, held
from autotune.sweep.options import SweepOptions
from autotune.trial.compilecache import study_cache_dir
from autotune.trial.probe import device_facts

__all__ = [
    "HEADROOM",
    "LOWER_PRECISION_MEMORY",
    "DeviceFacts",
    "Expert",
    "InformedStart",
    "expert_params",
    "largest_batch",
    "likely_starts",
    "precision_twin",
    "probe_device",
]

LEASE = "informed start"  # the study's lease held by the worker that decides it
HEADROOM = 0.9  # the share of the device's memory (and of a memory constraint) the chosen batch may fill
# Peak memory in bf16/fp16 autocast over fp32 at the same batch (H100/H200, BENCHMARKS.md): GPT-2 16.1 against
# 19.8 GiB (0.81), ResNet-50 about 0.53. The larger ratio: a batch chosen by it fits both.
LOWER_PRECISION_MEMORY = 0.8
LOADER_WORKERS = 4  # the best loader measured behind ResNet-50 on an H100 (README: the whole job)
PROBE_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class DeviceFacts:
    """What the informed start needs to know of the device and the workload, as a trial process sees them."""

    device: str  # cuda | cpu
    name: str = ""
    memory_gib: float | None = None  # the device's total memory (a CPU's: the host's)
    bf16: bool = False  # bf16 autocast pays: a GPU that has it, a CPU with AMX tiles
    four_d_weights: bool | None = None  # None: not asked (the space does not search memory_format), or unknown
    workload_choices: dict[str, Any] = field(default_factory=dict)
    cpus: int = 1
    layout_error: str | None = None  # why the model's weights could not be looked at (memory_format then stays)

    @property
    def gpu(self) -> bool:
        return self.device == "cuda"

    def describe(self) -> str:
        """``NVIDIA H100 80GB HBM3 (79.1 GiB, bf16)``."""
        notes = [f"{self.memory_gib:.1f} GiB"] if self.memory_gib else []
        notes.append("bf16" if self.bf16 else "no bf16")
        return f"{self.name or self.device} ({', '.join(notes)})"


@dataclass(frozen=True)
class Expert:
    """The configuration an expert would try first (:func:`expert_params`): its params, what changed from the
    default's, and notes on how (the batch's reckoning)."""

    params: dict[str, Any]
    changes: dict[str, Any]
    notes: tuple[str, ...] = ()

    def describe(self) -> str:
        """``precision=bf16, compile_mode=default, batch_size=64 (...)``."""
        changed = ", ".join(f"{name}={_show(value)}" for name, value in self.changes.items())
        return changed + "".join(f" ({note})" for note in self.notes)

    def with_values(self, values: dict[str, Any], default: TrialRecord, note: str) -> Expert:
        """These params set to ``values`` (the listed kernels' own choices), and ``note`` on how they were found."""
        params = {**self.params, **values}
        changes = {name: value for name, value in params.items() if default.params.get(name, _MISSING) != value}
        return Expert(params, changes, (*self.notes, note) if note else self.notes)


def _show(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


# -- the expert's choice ---------------------------------------------------------------------------------------


def _preferences(name: str, facts: DeviceFacts) -> tuple[Any, ...]:
    """The values an expert tries for knob ``name`` on this device, best first (empty: keep the default's)."""
    gpu = facts.gpu
    if name == "precision":
        if gpu:
            return ("bf16", "fp16", "tf32") if facts.bf16 else ("fp16", "tf32")
        return ("bf16",) if facts.bf16 else ()
    if name == "memory_format":
        return ("channels_last",) if facts.four_d_weights else ()
    if name == "compile_mode":
        return ("default",)
    if name == "fused_optimizer":
        return (True,)
    if name in ("cudnn_benchmark", "pin_memory", "non_blocking"):
        return (True,) if gpu else ()
    if gpu and name in facts.workload_choices:
        return (facts.workload_choices[name],)
    return ()


def _base(spec: ParamSpec, default: TrialRecord) -> Any:
    """What ``spec`` takes where the expert has no opinion: the default trial's value, else the space's default."""
    value = default.params.get(spec.name)
    if value is not None and spec.contains(value):
        return value
    return spec.default if spec.default is not None else spec.first()


def _pick(spec: ParamSpec, facts: DeviceFacts, default: TrialRecord, precision: Any) -> Any:
    if spec.kind == "fixed":
        return spec.first()
    for value in _preferences(spec.name, facts):
        if spec.contains(value):
            return value
    if spec.name == "num_workers" and facts.gpu and spec.count() is not None:
        target = min(LOADER_WORKERS, max(1, facts.cpus // 2))
        return min(spec.values(), key=lambda v: (abs(v - target), v))
    if spec.name == "matmul_precision" and facts.gpu and precision == "default" and spec.contains("high"):
        return "high"  # no lower precision on offer: TF32 matmuls at least
    return _base(spec, default)


def _peak_constraints_hold(space: Space, peak_gib: float) -> tuple[bool, list[str]]:
    """Whether every constraint of the space over peak memory alone holds at ``peak_gib``, and their texts."""
    texts, holds = [], True
    for constraint in space.constraints:
        if constraint.names == {"peak_mem_gib"}:
            texts.append(constraint.text)
            holds = holds and bool(constraint.evaluate({"peak_mem_gib": peak_gib}))
    return holds, texts


def largest_batch(
    spec: ParamSpec,
    default: TrialRecord,
    facts: DeviceFacts,
    space: Space,
    lower_precision: bool,
    memory_cap_gib: float | None = None,
) -> tuple[Any, str | None]:
    """The largest batch the default trial's measured peak says will fit, and how that was reckoned.

    Peak memory is scaled from the default's in proportion to the batch (an over-estimate for a larger batch:
    the weights and optimizer state do not grow with it), times :data:`LOWER_PRECISION_MEMORY` when the expert
    lowers the precision. It must fit in :data:`HEADROOM` of the device's memory (and of ``--memory-cap``), and
    every constraint over ``peak_mem_gib`` must hold at it over :data:`HEADROOM`. On a CPU, or without a peak
    to scale, the default's batch stays; after an OOM, the largest batch below the default's.
    """
    base = _base(spec, default)
    batch = default.params.get(spec.name) or (default.result.params.get(spec.name) if default.result else None)
    count = spec.count()
    if not isinstance(batch, int) or count is None or count > 10_000:
        return base, None
    values = sorted(v for v in spec.values() if isinstance(v, int))
    if default.result is not None and default.result.status is Status.OOM:
        smaller = [v for v in values if v < batch]
        return (smaller[-1], f"trial {default.number} ran out of memory at batch {batch}") if smaller else (base, None)
    peak = finite(default.metrics.get("peak_mem_gib")) if default.ok else None
    if not facts.gpu or peak is None or peak <= 0:
        return base, None
    per_sample = peak / batch * (LOWER_PRECISION_MEMORY if lower_precision else 1.0)
    limits = [m for m in (facts.memory_gib, memory_cap_gib) if m]
    usable = HEADROOM * min(limits) if limits else None

    def fits(value: int) -> bool:
        estimate = per_sample * value
        holds, _ = _peak_constraints_hold(space, estimate / HEADROOM)
        return holds and (usable is None or estimate <= usable)

    fitting = [v for v in values if fits(v)]
    chosen = fitting[-1] if fitting else values[0]
    bounds = [f"{usable:.1f} GiB usable"] if usable is not None else []
    bounds += _peak_constraints_hold(space, 0.0)[1]
    how = (
        f"trial {default.number}'s peak {peak:.1f} GiB at batch {batch} scaled: about {per_sample * chosen:.1f} GiB "
        f"at {chosen}{' in lower precision' if lower_precision else ''}, within {' and '.join(bounds) or 'no limit'}"
    )
    return chosen, how


def expert_params(
    space: Space, default: TrialRecord, facts: DeviceFacts, memory_cap_gib: float | None = None
) -> Expert:
    """The configuration an expert would try first for ``space`` on the device ``facts`` describe, after the
    ``default`` trial (see the module docstring): a point of the space, params in declaration order."""
    specs = space.params
    precision = _pick(specs["precision"], facts, default, None) if "precision" in specs else None
    lower = precision in ("bf16", "fp16") and default.params.get("precision") not in ("bf16", "fp16")
    notes: list[str] = []
    params: dict[str, Any] = {}
    for spec in specs.values():
        if not spec.is_active(params):
            continue
        if spec.name == "batch_size":
            value, how = largest_batch(spec, default, facts, space, lower, memory_cap_gib)
            if how is not None and value != default.params.get("batch_size"):
                notes.append(how)
        else:
            value = _pick(spec, facts, default, precision)
        params[spec.name] = value
    changes = {name: value for name, value in params.items() if default.params.get(name, _MISSING) != value}
    return Expert(params, changes, tuple(notes))


_MISSING = object()
HALF_PRECISIONS = ("bf16", "fp16")


def precision_twin(space: Space, start: dict[str, Any], facts: DeviceFacts) -> dict[str, Any] | None:
    """The informed start's params ``start`` in the other half precision (fp16 for bf16, bf16 for fp16), measured
    next to it: where the GPU has both (bf16) and the space searches both; None elsewhere, or where the change would
    switch another param on or off (a ``when:`` on the precision) or break a rule.

    Tensor cores run the two at one rate; what differs is the rest of the step (fp16's loss scaling, each format's
    casts and fused kernels), so which wins is the model's to say, and an expert measures both. On an H100 ResNet-50
    ran 6,261.5 images/s in fp16 against 5,985.1 in bf16, GPT-2 479,581 tokens/s in fp16 against 494,207 in bf16
    (BENCHMARKS.md); a ResNet-50 sweep that searched around a bf16 informed start never compiled fp16 at its batch
    and ended at 0.958 of the fp16 winner.
    """
    precision = start.get("precision")
    spec = space.params.get("precision")
    if not facts.gpu or not facts.bf16 or precision not in HALF_PRECISIONS or spec is None or spec.kind == "fixed":
        return None
    other = HALF_PRECISIONS[1 - HALF_PRECISIONS.index(precision)]
    if not spec.contains(other):
        return None
    twin = {**start, "precision": other}
    if any(param.is_active(twin) != param.is_active(start) for param in space.params.values()):
        return None
    return twin if space.is_feasible(twin)[0] else None


def likely_starts(
    space: Space, default: TrialRecord, facts: DeviceFacts, count: int, memory_cap_gib: float | None = None
) -> list[dict[str, Any]]:
    """Before ``default`` is measured: the configurations the informed start will most likely be, most likely first,
    at most ``count`` (points of the space; empty where the expert would change nothing).

    All but the batch is known: :func:`expert_params` decides it from the device alone. The batch is the largest
    whose memory the default's peak says will fit, and that peak is not measured yet: on a GPU each of the space's
    ``count`` largest batches (none below the default's) is a guess, the largest first; on a CPU it is the
    default's batch, as the informed start keeps it there. The most likely guess's twin in the other half precision
    (:func:`precision_twin`, measured after it) comes second: it runs next, and a graph not compiled ahead by then
    compiles in its trial (ResNet-50 on an H100: 43 s of 58).
    """
    expert = expert_params(space, default, facts, memory_cap_gib)  # unmeasured default: its batch stays
    if not expert.changes:
        return []
    batch, spec = expert.params.get("batch_size"), space.params.get("batch_size")
    guesses = [expert.params]
    if facts.gpu and isinstance(batch, int) and spec is not None and (spec.count() or 10_001) <= 10_000:
        larger = sorted((v for v in spec.values() if isinstance(v, int) and v >= batch), reverse=True)
        guesses = [{**expert.params, "batch_size": value} for value in larger]
    feasible = [params for params in guesses if space.is_feasible(params)[0]]
    twin = precision_twin(space, feasible[0], facts) if feasible else None
    return (feasible[:1] + ([twin] if twin is not None else []) + feasible[1:])[:count]


class ProbeFailed(Exception):
    """The device could not be asked (the trial process failed or timed out)."""


def probe_device(space: Space, options: SweepOptions, default_params: dict[str, Any]) -> DeviceFacts:
    """Ask a trial process about the device and the workload (:func:`autotune.trial.probe.device_facts`);
    :class:`ProbeFailed` if it cannot answer."""
    layout = any(spec.name == "memory_format" and spec.kind != "fixed" for spec in space.params.values())
    device = options.device or space.device
    args = (space.workload.name, space.workload.preset, dict(space.workload.args), default_params, device, layout)
    outcome = TrialRunner().call(device_facts, args, PROBE_TIMEOUT_S)
    if outcome.timed_out:
        raise ProbeFailed(f"no answer within {PROBE_TIMEOUT_S:g} s")
    if outcome.failure is not None:
        raise ProbeFailed(f"the process {outcome.failure}")
    return DeviceFacts(**outcome.value)


# -- once per study -----------------------------------------------------------------------------------------------


class InformedStart:
    """One worker's part in the study's informed start (see the module docstring): :meth:`queue` before each ask."""

    def __init__(
        self, ctx: SweepContext, leases: LeaseTable | None, worker: str, signals: StopSignals | None = None
    ) -> None:
        self.ctx = ctx
        self.leases = leases
        self.worker = worker
        self.signals = signals  # a stop signal ends the wait for the device's answer at once
        options, space = ctx.options, ctx.space
        off = not options.informed_start or options.replay is not None or space.sampler.name == "grid"
        self._settled = off  # nothing more for this worker to do
        self._facts: DeviceFacts | None = None  # the device's answer, once asked

    def queue(self) -> None:
        """Once the default is measured: decide the informed start, unless the study holds that decision already
        or another worker is taking it now (then look again at the next ask)."""
        if self._settled:
            return
        default = self.ctx.records.default
        if default is None:
            return  # not measured yet
        if self._decided():
            self._settled = True
            return
        if self.leases is None:
            self._decide(default)
        elif self.leases.acquire(LEASE, self.worker) is None:
            with held(self.leases, LEASE, self.worker):
                self.ctx.records.refresh()
                if not self._decided():
                    self._decide(default)
        else:
            return  # another worker decides it now
        self._settled = True

    def likely(self, default: TrialRecord, count: int) -> list[dict[str, Any]]:
        """While ``default`` is not measured yet: the informed start's likely configurations (:func:`likely_starts`),
        for the sweep to compile ahead while the default runs. The device is asked now, once (the decision after
        the default reuses the answer). Empty where no informed start is to come, where the device cannot be asked,
        and for a space with listed kernels (their block sizes are chosen by a GPU run after the default)."""
        ctx = self.ctx
        if self._settled or ctx.space.kernels or self._decided():
            return []
        try:
            facts = self._device(default)
        except ProbeFailed:
            return []  # asked again, and said, when the default is measured
        return likely_starts(ctx.space, default, facts, count, ctx.options.memory_cap_gib)

    def _device(self, default: TrialRecord) -> DeviceFacts:
        """What the device is (:func:`probe_device`), asked once; :class:`ProbeFailed` when it cannot answer."""
        if self._facts is None:
            interruptible = self.signals.interruptible if self.signals is not None else contextlib.nullcontext
            with interruptible():
                self._facts = probe_device(self.ctx.space, self.ctx.options, default.params)
        return self._facts

    def _decided(self) -> bool:
        """Whether the study holds an informed start (queued, running or measured) or a decision not to."""
        if any(record.informed for record in self.ctx.records.trials):
            return True
        return schema.STUDY_ATTR_INFORMED in self.ctx.study.user_attrs

    def _decide(self, default: TrialRecord) -> None:
        ctx = self.ctx
        interruptible = self.signals.interruptible if self.signals is not None else contextlib.nullcontext
        try:
            facts = self._device(default)
        except ProbeFailed as exc:
            self._none(f"the device could not be asked: {exc}")
            return
        expert = expert_params(ctx.space, default, facts, ctx.options.memory_cap_gib)
        on = f"on {facts.describe()}"
        if not expert.changes:
            self._none(f"{on}, the default configuration is what an expert would try in this space")
            return
        prepared: dict[str, float] = {}
        if ctx.space.kernels:  # their block sizes as their own autotuners choose them (autotune.sweep.kernelstart)
            began = time.monotonic()
            with interruptible():
                values, note = autotuned_kernel_params(
                    ctx.space, expert.params, ctx.options.device or ctx.space.device,
                    str(study_cache_dir(ctx.options.storage, ctx.study.study_name)), ctx.options.memory_cap_gib,
                )  # fmt: skip
            expert = expert.with_values(values, default, note)
            prepared = {schema.ATTR_PREPARED_S: time.monotonic() - began}  # device time: the trial's, in its figures
        earlier = ctx.records.measured_with(expert.params)
        if earlier is not None:
            self._none(f"{on}, trial {earlier.number} has its choice already: {expert.describe()}")
            return
        feasible, rule = ctx.space.is_feasible(expert.params)
        if not feasible:
            self._none(f"{on}, its choice breaks the rule {rule}: {expert.describe()}")
            return
        attrs = {schema.ATTR_INFORMED: True, **prepared}
        ctx.study.enqueue_trial(ctx.space.optuna_params(expert.params), user_attrs=attrs)
        number = self._queued_number()
        why = f"{on}: {expert.describe()}"
        if facts.layout_error:
            why += f" (memory_format kept: the workload could not be built on the meta device: {facts.layout_error})"
        ctx.study.set_user_attr(schema.STUDY_ATTR_INFORMED, {"trial": number, "params": expert.params, "why": why})
        twin = precision_twin(ctx.space, expert.params, facts)
        if twin is not None and ctx.records.measured_with(twin) is None:
            ctx.study.enqueue_trial(ctx.space.optuna_params(twin))  # asked next: FIFO after the informed start
        ctx.records.refresh()
        ctx.progress.message(f"informed start: trial {number} measures what an expert would try first {why}")
        if twin is not None:
            ctx.progress.message(f"informed start: then the same in {twin['precision']} (which half precision wins "
                                 "is the model's to say)")  # fmt: skip

    def _queued_number(self) -> int | None:
        waiting = self.ctx.study.get_trials(deepcopy=False, states=(TrialState.WAITING,))
        queued = [t.number for t in waiting if is_informed(t)]
        return queued[-1] if queued else None

    def _none(self, reason: str) -> None:
        self.ctx.study.set_user_attr(schema.STUDY_ATTR_INFORMED, {"none": reason})
        self.ctx.progress.message(f"informed start: none queued: {reason}")
