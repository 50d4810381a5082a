"""The knobs autotune turns, and the one place where each is applied.

The trial job and production ``autotune.load(...).apply(model, optimizer)`` both call
:func:`apply`, so the configuration that was measured is exactly the one that ships.

Precision semantics (TF32 is set through PyTorch's ``fp32_precision`` API only: mixing it with
the legacy ``allow_tf32`` flags is an error in PyTorch >= 2.9):

- ``default``: PyTorch's own defaults, untouched (fp32 weights; cuDNN convolutions may use TF32,
  matmuls do not);
- ``fp32``: strict IEEE fp32, TF32 off for matmuls and cuDNN;
- ``tf32``: TF32 on for matmuls and cuDNN;
- ``bf16`` / ``fp16``: fp32 weights with autocast; fp16 adds a gradient scaler.

The data-path knobs (:data:`DATA_KNOBS`: workers, pinning, prefetching, copies) are registered here
with the others and applied where the data flows: :mod:`autotune.data` builds the ``DataLoader``
from them and copies each batch to the device as they say, for the trials and for production alike.

The ``inductor`` knob holds Inductor options (:mod:`autotune.inductor`: an allowlist, set by a
space's ``finalists:`` stage). They go to ``torch.compile(options=...)`` with the compile mode's
own options, so Inductor patches its config with them while it compiles this model, and only then.

``compile_scope`` says what ``torch.compile`` compiles: the whole model (``model``, the default), or each of its
repeated blocks in place (``blocks``: regional compilation, :mod:`autotune.regional`; the blocks a model names in
``_repeated_blocks``, else the largest set of structurally identical children). A model with no repeated blocks is
compiled whole, with ``compile_scope`` recorded as a no-op. ``compile_scope=blocks`` with ``compile_mode=none`` is
an invalid combination: nothing would be compiled, and the trial would only repeat the eager configuration's
(a space makes the scope conditional instead: ``when: {compile_mode: [...]}``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

import torch

from autotune import assembler, inductor, regional
from autotune.errors import AutotuneError, InvalidCombination

__all__ = [
    "DATA_KNOBS",
    "KNOB_SPECS",
    "KnobSpec",
    "Knobs",
    "StepContext",
    "apply",
    "apply_backend_flags",
    "compile_arguments",
]

PRECISIONS = ("default", "fp32", "tf32", "bf16", "fp16")
MEMORY_FORMATS = ("contiguous", "channels_last")
COMPILE_MODES = ("none", "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
COMPILE_SCOPES = ("model", "blocks")
MATMUL_PRECISIONS = ("auto", "highest", "high")
CUDAGRAPH_MODES = ("reduce-overhead", "max-autotune")  # the compile modes that capture CUDA graphs
AUTOCAST_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
# Optimizers whose constructors take ``fused=True`` (torch.optim with a fused kernel).
FUSABLE_OPTIMIZERS = (torch.optim.Adam, torch.optim.AdamW, torch.optim.SGD, torch.optim.Adagrad)
# torch.backends.cudnn as the knobs use it: its conv/rnn fp32_precision settings are missing from torch's stubs.
_CUDNN: Any = torch.backends.cudnn


@dataclass(frozen=True)
class KnobSpec:
    """One knob: its type, the values it takes and what it does (shown by ``--help`` and errors).

    ``minimum`` bounds an int knob from below; ``nullable`` lets it be None (PyTorch's own default).
    ``parse`` reads a value that is more than one word (the ``inductor`` options), raising
    AutotuneError for a bad one.
    """

    name: str
    kind: type
    choices: tuple[Any, ...] | None
    doc: str
    minimum: int | None = None
    nullable: bool = False
    parse: Callable[[Any], Any] | None = None


KNOB_SPECS: dict[str, KnobSpec] = {
    spec.name: spec
    for spec in (
        KnobSpec("batch_size", int, None, "samples per training step (default: the workload's)", minimum=1),
        KnobSpec("precision", str, PRECISIONS, "numeric precision of the training step"),
        KnobSpec("memory_format", str, MEMORY_FORMATS, "layout of 4-D weights and inputs"),
        KnobSpec("compile_mode", str, COMPILE_MODES, "torch.compile mode, or none for eager"),
        KnobSpec(
            "compile_scope", str, COMPILE_SCOPES, "what is compiled: the whole model, or each repeated block in place"
        ),
        KnobSpec("cudnn_benchmark", bool, (True, False), "let cuDNN time its algorithms (None: untouched)"),
        KnobSpec("cudnn_deterministic", bool, (True, False), "deterministic cuDNN algorithms only"),
        KnobSpec("fused_optimizer", bool, (True, False), "fused optimizer step (Adam, AdamW, SGD, Adagrad)"),
        KnobSpec("matmul_precision", str, MATMUL_PRECISIONS, "fp32 matmul precision; auto follows precision"),
        KnobSpec("num_workers", int, None, "DataLoader worker processes (0: load in the training process)", minimum=0),
        KnobSpec("pin_memory", bool, (True, False), "DataLoader returns batches in pinned host memory (GPU only)"),
        KnobSpec(
            "prefetch_factor", int, None, "batches each worker loads ahead (None: torch's)", minimum=1, nullable=True
        ),
        KnobSpec("persistent_workers", bool, (True, False), "keep the workers alive from one epoch to the next"),
        KnobSpec("non_blocking", bool, (True, False), "copy batches with tensor.to(device, non_blocking=True)"),
        KnobSpec("gpu_prefetch", bool, (True, False), "copy the next batch on a side CUDA stream during this step"),
        KnobSpec(
            "inductor",
            str,
            None,
            "Inductor options for torch.compile (a space's finalists set them; None: Inductor's own)",
            nullable=True,
            parse=lambda value: inductor.to_text(inductor.parse(value)),
        ),
    )
}
# The knobs of the input pipeline: applied by autotune.data, no-ops for a workload that makes its batches on the device.
DATA_KNOBS = ("num_workers", "pin_memory", "prefetch_factor", "persistent_workers", "non_blocking", "gpu_prefetch")

_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}
_NONE = {"none", "null", "default"}


def parse_bool(value: Any) -> bool | None:
    """``true/false``, ``1/0``, ``yes/no``, ``on/off`` (any case) as a bool; None for anything else."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    return text in _TRUE if text in _TRUE | _FALSE else None


def _coerce(spec: KnobSpec, value: Any) -> Any:
    """Turn a CLI string or a YAML value into the knob's type, or say what is wrong with it."""
    if value is None and (spec.kind is bool or spec.nullable):
        return None
    if spec.nullable and str(value).strip().lower() in _NONE:
        return None
    if spec.parse is not None:
        return spec.parse(value)
    if spec.kind is bool:
        if (parsed := parse_bool(value)) is not None:
            return parsed
    elif spec.kind is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        with contextlib.suppress(ValueError):
            return int(str(value).strip())
    elif spec.kind is str and (spec.choices is None or str(value) in spec.choices):
        return str(value)
    raise AutotuneError(f"knob {spec.name}={value!r} is not valid: expected {_allowed(spec)}")


def _allowed(spec: KnobSpec) -> str:
    """The values a knob takes, as an error message says them."""
    if spec.choices:
        return ", ".join(str(c).lower() for c in spec.choices)
    allowed = f"an {spec.kind.__name__}" + (f" >= {spec.minimum}" if spec.minimum is not None else "")
    return allowed + (" or none" if spec.nullable else "")


def _check_minimum(spec: KnobSpec, value: Any) -> None:
    if spec.minimum is not None and value is not None and value < spec.minimum:
        raise AutotuneError(f"knob {spec.name}={value!r} is not valid: expected {_allowed(spec)}")


@dataclass(frozen=True)
class Knobs:
    """A full knob setting. ``None`` for a cuDNN flag means PyTorch's own default, untouched."""

    batch_size: int | None = None
    precision: str = "default"
    memory_format: str = "contiguous"
    compile_mode: str = "none"
    compile_scope: str = "model"
    cudnn_benchmark: bool | None = None
    cudnn_deterministic: bool | None = None
    fused_optimizer: bool = False
    matmul_precision: str = "auto"
    num_workers: int = 0
    pin_memory: bool = False
    prefetch_factor: int | None = None
    persistent_workers: bool = False
    non_blocking: bool = False
    gpu_prefetch: bool = False
    inductor: str | None = None  # Inductor options in their text form (autotune.inductor.to_text)

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> Knobs:
        """Knobs from a ``{name: value}`` mapping (strings allowed); unknown names are errors."""
        values: dict[str, Any] = {}
        for name, raw in params.items():
            spec = KNOB_SPECS.get(name)
            if spec is None:
                raise AutotuneError(f"unknown knob {name!r}; knobs are: {', '.join(KNOB_SPECS)}")
            values[name] = _coerce(spec, raw)
            _check_minimum(spec, values[name])
        return cls(**values)

    def to_params(self) -> dict[str, Any]:
        """All knobs as a plain dict (the ``params`` of a TrialResult and of a tuned config)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @property
    def inductor_options(self) -> dict[str, bool | str]:
        """The Inductor options, typed (``{}`` for none)."""
        return inductor.parse(self.inductor) if self.inductor else {}

    def check_combination(self, device_type: str) -> None:
        """Raise :class:`InvalidCombination` when legal values cannot run together."""
        if self.compile_scope == "blocks" and self.compile_mode == "none":
            raise InvalidCombination(
                "compile_scope=blocks needs a compile_mode other than none: eager compiles no blocks "
                "(in a space: compile_scope: {choices: [model, blocks], when: {compile_mode: [default, ...]}})"
            )
        if self.cudnn_benchmark and self.cudnn_deterministic:
            raise InvalidCombination("cudnn_benchmark=true contradicts cudnn_deterministic=true")
        implied = {"fp32": "highest", "tf32": "high"}.get(self.precision)
        if implied and self.matmul_precision not in ("auto", implied):
            raise InvalidCombination(
                f"precision={self.precision} implies matmul_precision={implied}, got {self.matmul_precision}"
            )
        if device_type == "cuda" and self.precision == "bf16" and not torch.cuda.is_bf16_supported():
            raise InvalidCombination("precision=bf16 needs a GPU with bf16 support (Ampere or newer)")


def apply_backend_flags(knobs: Knobs, device_type: str) -> list[str]:
    """Set the process-wide backend flags the knobs ask for; return the knobs that were no-ops."""
    noops: list[str] = []
    cudnn_flags = {"cudnn_benchmark": knobs.cudnn_benchmark, "cudnn_deterministic": knobs.cudnn_deterministic}
    for name, value in cudnn_flags.items():
        if value is None:
            continue
        if device_type != "cuda":
            noops.append(name)  # cuDNN does not run on this device: recorded, not an error
            continue
        setattr(torch.backends.cudnn, name.removeprefix("cudnn_"), value)
    tf32 = {"fp32": "ieee", "tf32": "tf32"}.get(knobs.precision)
    if tf32 is not None:
        _CUDNN.conv.fp32_precision = tf32
        _CUDNN.rnn.fp32_precision = tf32
        torch.backends.cuda.matmul.fp32_precision = tf32
    if knobs.matmul_precision != "auto":
        torch.backends.cuda.matmul.fp32_precision = "ieee" if knobs.matmul_precision == "highest" else "tf32"
    if device_type != "cuda" and (tf32 is not None or knobs.matmul_precision != "auto"):
        noops.append("tf32")  # TF32 is a tensor-core mode; CPUs compute plain fp32
    return noops


def _has_4d_weights(model: torch.nn.Module) -> bool:
    return any(p.dim() == 4 for p in model.parameters())


def _set_fused(optimizer: torch.optim.Optimizer) -> None:
    """Switch an existing optimizer to its fused kernel, as ``fused=True`` at construction would."""
    if not isinstance(optimizer, FUSABLE_OPTIMIZERS):
        raise InvalidCombination(f"fused_optimizer=true: {type(optimizer).__name__} has no fused step")
    if optimizer.state:
        raise AutotuneError("fused_optimizer: apply the config before the optimizer's first step")
    optimizer.defaults["fused"] = True
    for group in optimizer.param_groups:
        group["fused"] = True
        group["foreach"] = None
    # What torch.optim's constructors set for fused=True, so GradScaler hands over unscaling.
    optimizer._step_supports_amp_scaling = True


@dataclass
class StepContext:
    """What a training step needs from the knobs: input layout, autocast and (fp16) a grad scaler.

    A training step with it::

        with step_ctx.autocast():
            loss = loss_fn(model(step_ctx.prepare_inputs(x)), y)
        step_ctx.backward(loss)
        step_ctx.step()  # the optimizer given to apply(); or step_ctx.step(optimizer)
        step_ctx.zero_grad()
    """

    device_type: str
    autocast_dtype: torch.dtype | None = None
    channels_last_inputs: bool = False
    cudagraphs: bool = False
    scaler: torch.amp.GradScaler | None = None
    noops: list[str] = field(default_factory=list)
    optimizer: torch.optim.Optimizer | None = None  # the one the knobs were applied to
    # compile_scope=blocks: the blocks compiled one by one; empty (its reason says why) when the model has none.
    blocks: regional.Blocks | None = None

    def autocast(self) -> contextlib.AbstractContextManager[Any]:
        """Opens the forward pass of a step: autocast if the precision asks for it."""
        if self.cudagraphs:
            # A new iteration for CUDA-graph trees, so last step's graph outputs may be overwritten.
            torch.compiler.cudagraph_mark_step_begin()
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device_type, dtype=self.autocast_dtype)

    def prepare_inputs(self, inputs: Any) -> Any:
        """Put 4-D input tensors in channels_last when the weights are, so no conversion runs per step."""
        if self.channels_last_inputs and isinstance(inputs, torch.Tensor) and inputs.dim() == 4:
            return inputs.contiguous(memory_format=torch.channels_last)
        return inputs

    def backward(self, loss: torch.Tensor) -> None:
        (self.scaler.scale(loss) if self.scaler is not None else loss).backward()

    def step(self, optimizer: torch.optim.Optimizer | None = None) -> None:
        """Step ``optimizer`` (default: the one given to :func:`apply`), through the scaler under fp16."""
        optimizer = self._optimizer(optimizer)
        if self.scaler is None:
            optimizer.step()
            return
        self.scaler.step(optimizer)
        self.scaler.update()

    def zero_grad(self, optimizer: torch.optim.Optimizer | None = None) -> None:
        """Drop the gradients (``set_to_none``) of ``optimizer``, by default the one given to :func:`apply`."""
        self._optimizer(optimizer).zero_grad(set_to_none=True)

    def _optimizer(self, optimizer: torch.optim.Optimizer | None) -> torch.optim.Optimizer:
        chosen = optimizer if optimizer is not None else self.optimizer
        if chosen is None:
            raise AutotuneError("StepContext has no optimizer: pass one, or give apply() the optimizer")
        return chosen


def apply(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer | None,
    knobs: Knobs,
    device_type: str,
    compile_fn: Callable[..., Any] = torch.compile,
) -> tuple[torch.nn.Module, StepContext]:
    """Apply every knob: backend flags, memory format, optimizer, compile; return the model to train.

    With ``compile_scope=blocks`` the model returned is ``model`` itself (its class, its ``state_dict`` keys), its
    repeated blocks compiled in place; the step context's ``blocks`` says which. Raises
    :class:`InvalidCombination` for settings that cannot run together.
    """
    knobs.check_combination(device_type)
    assembler.pin()  # before anything compiles: the trial's and production's Triton keys then agree
    noops = apply_backend_flags(knobs, device_type)
    channels_last = knobs.memory_format == "channels_last"
    if channels_last and not _has_4d_weights(model):
        noops.append("memory_format")  # no 4-D weights (e.g. a transformer): nothing to re-lay out
        channels_last = False
    if channels_last:
        model = model.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
    if knobs.fused_optimizer and optimizer is not None:
        _set_fused(optimizer)
    compiles = knobs.compile_mode != "none"
    options = knobs.inductor_options
    cudagraphs = compiles and bool(options.get("triton.cudagraphs", knobs.compile_mode in CUDAGRAPH_MODES))
    if cudagraphs and device_type != "cuda":
        noops.append("cudagraphs")  # CUDA graphs need a GPU; inductor runs without them here
        cudagraphs = False
    if compiles:
        compile_backward_with_forward()
    blocks = regional.find_blocks(model) if compiles and knobs.compile_scope == "blocks" else None
    if blocks is not None and not blocks:
        noops.append("compile_scope")  # no repeated blocks: the whole model is compiled, as compile_scope=model
    if blocks:
        regional.compile_blocks(blocks, compile_fn, **compile_arguments(knobs))
    elif compiles:
        model = compile_fn(model, **compile_arguments(knobs))
    elif options:
        noops.append("inductor")  # eager: no compiler to give the options to
    dtype = AUTOCAST_DTYPES.get(knobs.precision)
    scaler = torch.amp.GradScaler(device_type) if knobs.precision == "fp16" else None
    ctx = StepContext(device_type, dtype, channels_last, cudagraphs, scaler, noops, optimizer, blocks)
    return model, ctx


def compile_backward_with_forward() -> None:
    """Have AOTAutograd compile a training graph's backward with its forward, not at the first backward.

    The compile is the same work, done a moment earlier (a training step runs the backward anyway); what changes
    is that a graph compiled ahead of its trial without running (:mod:`autotune.trial.ahead`) has its backward in
    the cache too, and the setting is part of AOTAutograd's cache key, so the trial and production, which both
    come through here, look up the entries the compile ahead wrote. Process-wide, like the backend flags; a torch
    without the setting keeps its own behaviour.
    """
    from torch._functorch import config as functorch_config

    if hasattr(functorch_config, "force_non_lazy_backward_lowering"):
        functorch_config.force_non_lazy_backward_lowering = True


def compile_arguments(knobs: Knobs) -> dict[str, Any]:
    """``torch.compile``'s keyword arguments for the knobs: the mode, or with Inductor options the mode's
    options and the knob's together (torch.compile takes one or the other; the knob's win).

    torch.compile turns a mode into these very options (``torch._inductor.list_mode_options``) and
    Inductor patches its config with them while it compiles this model: no process-wide setting.
    """
    options = knobs.inductor_options
    if not options:
        return {"mode": knobs.compile_mode}
    # deferred: Inductor adds ~1.2 s to torch's import; only knobs with Inductor options need it here
    from torch._inductor import list_mode_options

    merged = {**list_mode_options(knobs.compile_mode), **options}
    return {"options": {**merged, **inductor.cache_workarounds(merged)}}


@contextlib.contextmanager
def strict_fp32() -> Iterator[None]:
    """Strict IEEE fp32 for the duration (the numerics guard's reference pass), flags restored after."""
    saved = (torch.backends.cuda.matmul.fp32_precision, _CUDNN.conv.fp32_precision)
    torch.backends.cuda.matmul.fp32_precision = "ieee"
    _CUDNN.conv.fp32_precision = "ieee"
    try:
        yield
    finally:
        torch.backends.cuda.matmul.fp32_precision, _CUDNN.conv.fp32_precision = saved
