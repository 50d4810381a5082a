"""What an expert would try first for a space on a device, after the PyTorch default: the informed start's choice.

Pure functions of the space, the default trial's record and the device's facts (:class:`DeviceFacts`, asked by
:mod:`autotune.sweep.proposals.informed_start` in a trial process); nothing here runs a process or touches the study.

What it picks, each only where the space offers the value (a knob the space fixes or does not search
keeps its value; a ``when:`` is respected; other params keep the default's, and the space's listed kernels take
what their own autotuners choose in a short eager run of this configuration,
:mod:`autotune.sweep.proposals.kernel_start`):

- on a GPU: bf16 autocast where the GPU has it, else fp16 (else TF32); with bf16, float8 training (``tensorwise``)
  where the GPU has FP8 and the model's Linear layers are large enough to gain (:func:`float8_pays`); channels_last
  where the model has 4-D weights; ``torch.compile`` default; the fused optimizer; cuDNN benchmark; pinned batches,
  ``non_blocking`` copies and 4 loader workers; the workload's own choices where it names them (its
  build function's ``informed_start`` mapping: gpt2's fused LM head); and the largest batch whose
  memory the default's measured peak says will fit (:func:`largest_batch`), with activation checkpointing where a
  constraint on peak memory holds that batch back and checkpointing lets a larger one fit; then its twin
  (:func:`informed_twin`): the same without float8 where it trains in float8, else under a peak-memory constraint
  with checkpointing switched the other way, else in the other half precision;
- on a CPU: ``torch.compile`` default and the fused optimizer; channels_last for 4-D weights; bf16
  only where the CPU has AMX tiles (``amx_bf16``: elsewhere autocast to bf16 converts more than it
  saves, and fp16 autocast on a CPU is slower still); the default's batch (a CPU process's peak is
  its whole resident memory, not the batch's, and a CPU does not speed up with a larger batch as a
  GPU does); no Triton kernels (they need a GPU).

Before the default is measured, :func:`likely_starts` guesses the choice (all but the batch is known) so that its
graphs can be compiled ahead while the default runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from autotune.measurement import Status
from autotune.records import TrialRecord
from autotune.records.trial import finite
from autotune.space import Space
from autotune.space.params import ParamSpec

__all__ = [
    "CHECKPOINTED_MEMORY",
    "FLOAT8_MIN_SHARE",
    "FLOAT8_RECIPES_TRIED",
    "HALF_PRECISIONS",
    "HEADROOM",
    "LOWER_PRECISION_MEMORY",
    "DeviceFacts",
    "Expert",
    "checkpointing_twin",
    "expert_params",
    "float8_pays",
    "float8_twin",
    "informed_twin",
    "largest_batch",
    "likely_starts",
    "precision_twin",
]

HEADROOM = 0.9  # the share of the device's memory (and of a memory constraint) the chosen batch may fill
# Peak memory in bf16/fp16 autocast over fp32 at the same batch (H100/H200, BENCHMARKS.md): GPT-2 16.1 against
# 19.8 GiB (0.81), ResNet-50 about 0.53. The larger ratio: a batch chosen by it fits both.
LOWER_PRECISION_MEMORY = 0.8
# Peak memory with activation checkpointing over without it at the same batch, until the study has measured a trial
# with it (then its own peak is scaled instead). Checkpointing drops the blocks' activations (full keeps a block's
# input alone; selective its matmul and attention outputs too), but the peak also holds the weights, gradients and
# optimizer state (which largest_batch takes out first where the model's size is known, else it scales the whole peak
# with the batch), and the activations outside the blocks (a language model's logits), which it leaves alone. No GPU
# figure is recorded yet, so the factors are timid: a batch too large costs an out-of-memory trial, one a step too
# small a little throughput.
CHECKPOINTED_MEMORY = {"full": 0.7, "selective": 0.85}
LOADER_WORKERS = 4  # the best loader measured behind ResNet-50 on an H100 (README: the whole job)
HALF_PRECISIONS = ("bf16", "fp16")  # the two autocast formats, both measured where the GPU has both (precision_twin)
# The share of a model's Linear FLOPs that float8's default filter must convert (the output head, left out, counted
# in the whole: autotune.knobs.float8.converted_share) for the informed start to try float8. Provisional until
# measured on GPUs: it sits between the gpt2 workload's 0.40 (124M: 768-wide layers, a third of its FLOPs in the
# head) and the 0.76 of a Llama-style 1B decoder (2048 wide, MLP 8192), which gained 15.4% in tensorwise float8 on
# an H200.
FLOAT8_MIN_SHARE = 0.6
# The recipes an expert tries first, best first: tensorwise gained 15.4% (1B) and 21.6% (3B) on an H200 where rowwise
# lost 4.0% (1B), hand-measured (torchao 0.18, compiled, seq 2048).
FLOAT8_RECIPES_TRIED = ("tensorwise",)
_MISSING = object()


@dataclass(frozen=True)
class DeviceFacts:
    """What the informed start needs to know of the device and the workload, as a trial process sees them."""

    device: str  # cuda | cpu
    name: str = ""
    memory_gib: float | None = None  # the device's total memory (a CPU's: the host's)
    bf16: bool = False  # bf16 autocast pays: a GPU that has it, a CPU with AMX tiles
    four_d_weights: bool | None = None  # None: not asked (the space does not search memory_format), or unknown
    float8: bool = False  # a GPU with FP8 tensor cores, and torchao installed
    float8_share: float | None = None  # of the model's Linear FLOPs, what float8 converts; None: not asked
    workload_choices: dict[str, Any] = field(default_factory=dict)
    cpus: int = 1
    layout_error: str | None = None  # why the model's weights could not be looked at (memory_format then stays)
    # GiB of the model's weights, gradients and AdamW state (autotune.trial.probe.training_state_gib): the part of a
    # trial's peak that the batch does not grow; None: not asked (a CPU) or unknown
    state_gib: float | None = None

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


def float8_pays(facts: DeviceFacts) -> bool:
    """Whether an expert would train in float8 on this device: a GPU with FP8 (and torchao) where float8's default
    filter converts at least :data:`FLOAT8_MIN_SHARE` of the model's Linear FLOPs."""
    share = facts.float8_share
    return facts.gpu and facts.float8 and share is not None and share >= FLOAT8_MIN_SHARE


def _float8(spec: ParamSpec, facts: DeviceFacts, default: TrialRecord, precision: Any) -> Any:
    """float8's recipe where it pays (:func:`float8_pays`) and the precision is bf16, else the default's value."""
    if precision == "bf16" and float8_pays(facts):
        for recipe in FLOAT8_RECIPES_TRIED:
            if spec.contains(recipe):
                return recipe
    return _base(spec, default)


def _base(spec: ParamSpec, default: TrialRecord) -> Any:
    """What ``spec`` takes where the expert has no opinion: the default trial's value, else the space's default."""
    value = default.params.get(spec.name)
    if value is not None and spec.contains(value):
        return value
    return spec.default_value()


def _pick(spec: ParamSpec, facts: DeviceFacts, default: TrialRecord, precision: Any) -> Any:
    if spec.kind == "fixed":
        return spec.first()
    if spec.name == "float8":
        return _float8(spec, facts, default, precision)
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
    checkpointing: str | None = None,
) -> tuple[Any, str | None]:
    """The largest batch the default trial's measured peak says will fit, and how that was reckoned.

    The default's peak is split into the model's weights, gradients and optimizer state (``facts.state_gib``, which the
    batch does not grow) and the rest, scaled in proportion to the batch, times :data:`LOWER_PRECISION_MEMORY` when the
    expert lowers the precision, and times :data:`CHECKPOINTED_MEMORY` when ``checkpointing`` (the expert's
    ``activation_checkpointing``, which the default did not have) lowers it. Without ``state_gib`` the whole peak is
    scaled: an over-estimate for a larger batch, by the most for a large model (a 2B-parameter decoder's 30 GiB of
    state, of a 56 GiB peak at batch 2 in fp32, held its informed start at batch 4 on an H200 where 8 fit). It must fit
    in :data:`HEADROOM` of the device's memory (and of ``--memory-cap``), and every constraint over ``peak_mem_gib``
    must hold at it over :data:`HEADROOM`. On a CPU, or without a peak to scale, the default's batch stays; after an
    OOM, the largest batch below the default's.
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
    checkpointed = CHECKPOINTED_MEMORY.get(checkpointing or "none", 1.0)
    state = facts.state_gib if facts.state_gib is not None and 0 < facts.state_gib < peak else 0.0
    per_sample = (peak - state) / batch * (LOWER_PRECISION_MEMORY if lower_precision else 1.0) * checkpointed
    limits = [m for m in (facts.memory_gib, memory_cap_gib) if m]
    usable = HEADROOM * min(limits) if limits else None

    def estimate(value: int) -> float:
        return state + per_sample * value

    def fits(value: int) -> bool:
        holds, _ = _peak_constraints_hold(space, estimate(value) / HEADROOM)
        return holds and (usable is None or estimate(value) <= usable)

    fitting = [v for v in values if fits(v)]
    chosen = fitting[-1] if fitting else values[0]
    bounds = [f"{usable:.1f} GiB usable"] if usable is not None else []
    bounds += _peak_constraints_hold(space, 0.0)[1]
    recomputed = f" with activation_checkpointing={checkpointing}" if checkpointed != 1.0 else ""
    how = (
        f"trial {default.number}'s peak {peak:.1f} GiB at batch {batch}{_of_it_state(state)} scaled: "
        f"about {estimate(chosen):.1f} GiB "
        f"at {chosen}{' in lower precision' if lower_precision else ''}{recomputed}, "
        f"within {' and '.join(bounds) or 'no limit'}"
    )
    return chosen, how


def _of_it_state(state_gib: float) -> str:
    return f" ({state_gib:.1f} GiB of it weights, gradients and optimizer state)" if state_gib else ""


def _batch_for(
    spec: ParamSpec,
    default: TrialRecord,
    facts: DeviceFacts,
    space: Space,
    memory: _Memory,
    checkpointing: Any,
) -> tuple[Any, str | None]:
    """:func:`largest_batch` for the expert's ``checkpointing``: scaled from the latest measured trial with that
    checkpointing where there is one (its own peak: no factor), else from the default's."""
    alike = [
        record
        for record in memory.measured
        if record.ok
        and record.params.get("activation_checkpointing", "none") == checkpointing
        and isinstance(record.params.get("batch_size"), int)
        and finite(record.metrics.get("peak_mem_gib")) is not None
    ]
    reference = alike[-1] if alike and checkpointing not in (None, "none") else default
    lower = memory.precision in HALF_PRECISIONS and reference.params.get("precision") not in HALF_PRECISIONS
    added = checkpointing if reference.params.get("activation_checkpointing", "none") != checkpointing else None
    return largest_batch(spec, reference, facts, space, lower, memory.cap_gib, added)


@dataclass(frozen=True)
class _Memory:
    """What the batch's reckoning needs besides the default: the expert's precision, ``--memory-cap``, the study's
    measured trials."""

    precision: Any
    cap_gib: float | None
    measured: tuple[TrialRecord, ...]


def _memory_capped(space: Space) -> bool:
    """Whether a constraint of ``space`` caps the peak memory (``peak_mem_gib <= N``)."""
    return any(constraint.names == {"peak_mem_gib"} for constraint in space.constraints)


def _checkpointing(space: Space, default: TrialRecord, facts: DeviceFacts, memory: _Memory) -> Any:
    """What the expert sets ``activation_checkpointing`` to: the default's, unless a constraint on peak memory holds
    the batch below the space's largest and checkpointing (selective first: it recomputes less) lets a larger batch
    fit. Only a param that is always active (no ``when:``) is chosen so: the batch is reckoned with it."""
    spec, batch = space.params.get("activation_checkpointing"), space.params.get("batch_size")
    kept = _pick(spec, facts, default, memory.precision) if spec is not None else None
    if spec is None or batch is None or spec.kind == "fixed" or spec.when or not (facts.gpu and _memory_capped(space)):
        return kept
    plain, _ = _batch_for(batch, default, facts, space, memory, kept)
    for mode in ("selective", "full"):
        larger, _ = _batch_for(batch, default, facts, space, memory, mode) if spec.contains(mode) else (plain, None)
        if isinstance(larger, int) and isinstance(plain, int) and larger > plain:
            return mode
    return kept


def expert_params(
    space: Space,
    default: TrialRecord,
    facts: DeviceFacts,
    memory_cap_gib: float | None = None,
    measured: tuple[TrialRecord, ...] = (),
) -> Expert:
    """The configuration an expert would try first for ``space`` on the device ``facts`` describe, after the
    ``default`` trial (see the module docstring): a point of the space, params in declaration order. ``measured``
    are the study's measured trials: a checkpointed one tells the batch's reckoning what checkpointing saves."""
    specs = space.params
    precision = _pick(specs["precision"], facts, default, None) if "precision" in specs else None
    memory = _Memory(precision, memory_cap_gib, measured)
    checkpointing = _checkpointing(space, default, facts, memory)
    notes: list[str] = []
    params: dict[str, Any] = {}
    for spec in specs.values():
        if not spec.is_active(params):
            continue
        if spec.name == "batch_size":
            value, how = _batch_for(spec, default, facts, space, memory, checkpointing)
            if how is not None and value != default.params.get("batch_size"):
                notes.append(how)
        elif spec.name == "activation_checkpointing":
            value = checkpointing
        else:
            value = _pick(spec, facts, default, precision)
        params[spec.name] = value
    changes = {name: value for name, value in params.items() if default.params.get(name, _MISSING) != value}
    return Expert(params, changes, tuple(notes))


def informed_twin(space: Space, start: dict[str, Any], facts: DeviceFacts) -> dict[str, Any] | None:
    """The configuration measured right after the informed start ``start``, to settle the one choice in it that
    the expert could not reckon: without float8 where ``start`` trains in float8 (:func:`float8_twin`), else under a
    peak-memory constraint with activation checkpointing switched the other way (:func:`checkpointing_twin`), else in
    the other half precision (:func:`precision_twin`); None where there is none."""
    return float8_twin(space, start) or checkpointing_twin(space, start, facts) or precision_twin(space, start, facts)


def checkpointing_twin(space: Space, start: dict[str, Any], facts: DeviceFacts) -> dict[str, Any] | None:
    """Under a ``peak_mem_gib`` constraint, the informed start's params ``start`` with activation checkpointing
    switched the other way, at the same batch (see below); None elsewhere (switched on: only on a GPU, where the batch
    step follows), or where that breaks a rule.

    The expert reckons from the default trial's peak, which knows nothing of what the expert's other choices save
    (a fused head that never holds the logits, the compiler's fusions), nor how much of it checkpointing would keep.
    So the one choice it cannot reckon is measured beside it: where the expert turned checkpointing on (the space's
    default is ``none``), the twin is the same without it; on an H100 GPT-2's default held 8.9 GiB at batch 8
    (torch's head, eager), so under an 8 GiB cap the informed start took full checkpointing at 8 (217,957 tokens/s,
    2.8 GiB), and without it the fused head and the compiler ran batch 8 at 5.2 GiB and 360,728 tokens/s
    (BENCHMARKS.md). Where the expert left it off and the constraint held the batch below the space's largest, the
    twin is the same with ``full`` checkpointing (``selective`` where the space offers no ``full``): under 7 GiB,
    GPT-2's start keeps batch 4 without it, and full checkpointing let batch 32 fit in 4.0 GiB at 417,261 tokens/s.
    Either way the two peaks at one batch say what checkpointing saves, and the batch step
    (:mod:`autotune.sweep.proposals.batch_step`) takes each as far as its own peak allows."""
    spec, batch = space.params.get("activation_checkpointing"), space.params.get("batch_size")
    if spec is None or not spec.contains("none") or spec.default_value() != "none":
        return None  # not searched, or the space's own default checkpoints: the expert only kept it
    if start.get("activation_checkpointing", "none") != "none":
        return _active_only(space, start, {**start, "activation_checkpointing": "none"})
    mode = next((mode for mode in ("full", "selective") if spec.contains(mode)), None)
    size = start.get("batch_size")
    if mode is None or batch is None or not (facts.gpu and _memory_capped(space)) or not isinstance(size, int):
        return None
    if not any(isinstance(value, int) and value > size for value in batch.values()):
        return None  # the cap held no batch back: nothing for the recompute to buy
    return _active_only(space, start, {**start, "activation_checkpointing": mode})


def float8_twin(space: Space, start: dict[str, Any]) -> dict[str, Any] | None:
    """The informed start's params ``start`` without float8 (``float8: none`` and the params only float8 switches
    on, its filter), where ``start`` trains in float8 and the space offers ``none``; None elsewhere, or where that
    breaks a rule.

    Whether FP8 pays is the layer shapes' to say: by hand on an H200 tensorwise float8 gained 15.4% on a 1B Llama
    decoder and rowwise lost 4.0% (BENCHMARKS.md), and :data:`FLOAT8_MIN_SHARE` is a size rule, not a measurement
    of this model. Measured beside it, the twin makes float8 the winner only where it wins, and tells the sampler
    what float8 is worth from the first trials."""
    spec = space.params.get("float8")
    if spec is None or start.get("float8", "none") == "none" or not spec.contains("none"):
        return None
    return _active_only(space, start, {**start, "float8": "none"})


def precision_twin(space: Space, start: dict[str, Any], facts: DeviceFacts) -> dict[str, Any] | None:
    """The informed start's params ``start`` in the other half precision, measured next to it: fp16 for bf16 where
    the GPU has bf16 and the space searches both (the other way round where a space's start is fp16 by choice), less
    the params the change switches off (a ``when:`` on the precision: bf16's float8); None elsewhere, or where the
    change would switch another param on or break a rule. The space's listed kernels keep the block sizes their
    autotuners chose for the start (its precision).

    Tensor cores run the two at one rate; what differs is the rest of the step (fp16's loss scaling, each format's
    casts and fused kernels), so which wins is the model's to say, and an expert measures both. In one 20-trial sweep
    each on an H100 (BENCHMARKS.md), ResNet-50's informed start ran 5,938 images/s in bf16 and its
    twin 6,219 in fp16, GPT-2's 485,380 tokens/s in bf16 and 473,387 in fp16; a ResNet-50 sweep around a bf16
    informed start without the twin never compiled fp16 at its batch and ended at 0.958 of the fp16 winner.
    """
    precision = start.get("precision")
    spec = space.params.get("precision")
    if not facts.gpu or not facts.bf16 or precision not in HALF_PRECISIONS or spec is None:
        return None
    other = HALF_PRECISIONS[1 - HALF_PRECISIONS.index(precision)]
    if not spec.contains(other):
        return None
    return _active_only(space, start, {**start, "precision": other})


def _active_only(space: Space, start: dict[str, Any], twin: dict[str, Any]) -> dict[str, Any] | None:
    """``twin`` (``start`` with one value changed) less the params the change switches off, in declaration order as a
    sampler chooses them; None where the change would switch a param on (it would need a value of its own) or where
    the result breaks a rule."""
    if any(param.is_active(twin) and not param.is_active(start) for param in space.params.values()):
        return None
    kept: dict[str, Any] = {}  # a param that a dropped one switched on goes too
    for param in space.params.values():
        if param.name in twin and param.is_active(kept):
            kept[param.name] = twin[param.name]
    return kept if space.is_feasible(kept)[0] else None


def likely_starts(
    space: Space, default: TrialRecord, facts: DeviceFacts, count: int, memory_cap_gib: float | None = None
) -> list[dict[str, Any]]:
    """Before ``default`` is measured: the configurations the informed start will most likely be, most likely first,
    at most ``count`` (points of the space; empty where the expert would change nothing).

    All but the batch is known: :func:`expert_params` decides it from the device alone. The batch is the largest whose
    memory the default's peak says will fit, and that peak is not measured yet: on a GPU each of the space's largest
    batches (none below the default's) is a guess, the largest first; on a CPU it is the default's batch, as the
    informed start keeps it there. The most likely guess's twin (:func:`informed_twin`, measured after it) comes second,
    before the other batches: it runs next, and a graph not compiled ahead by then compiles in its trial (ResNet-50 on
    an H100: 44.8 s of a 58 s trial).
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
    twin = informed_twin(space, feasible[0], facts) if feasible else None
    return (feasible[:1] + ([twin] if twin is not None else []) + feasible[1:])[:count]
