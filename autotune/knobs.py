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
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

import torch

from autotune.errors import AutotuneError, InvalidCombination

__all__ = [
    "KNOB_SPECS",
    "KnobSpec",
    "Knobs",
    "StepContext",
    "apply",
    "apply_backend_flags",
]

PRECISIONS = ("default", "fp32", "tf32", "bf16", "fp16")
MEMORY_FORMATS = ("contiguous", "channels_last")
COMPILE_MODES = ("none", "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
MATMUL_PRECISIONS = ("auto", "highest", "high")
CUDAGRAPH_MODES = ("reduce-overhead", "max-autotune")  # the compile modes that capture CUDA graphs
AUTOCAST_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
# Optimizers whose constructors take ``fused=True`` (torch.optim with a fused kernel).
FUSABLE_OPTIMIZERS = (torch.optim.Adam, torch.optim.AdamW, torch.optim.SGD, torch.optim.Adagrad)


@dataclass(frozen=True)
class KnobSpec:
    """One knob: its type, the values it takes and what it does (shown by ``--help`` and errors)."""

    name: str
    kind: type
    choices: tuple[Any, ...] | None
    doc: str


KNOB_SPECS: dict[str, KnobSpec] = {
    spec.name: spec
    for spec in (
        KnobSpec("batch_size", int, None, "samples per training step (default: the workload's)"),
        KnobSpec("precision", str, PRECISIONS, "numeric precision of the training step"),
        KnobSpec("memory_format", str, MEMORY_FORMATS, "layout of 4-D weights and inputs"),
        KnobSpec("compile_mode", str, COMPILE_MODES, "torch.compile mode, or none for eager"),
        KnobSpec("cudnn_benchmark", bool, (True, False), "let cuDNN time its algorithms (None: untouched)"),
        KnobSpec("cudnn_deterministic", bool, (True, False), "deterministic cuDNN algorithms only"),
        KnobSpec("fused_optimizer", bool, (True, False), "fused optimizer step (Adam, AdamW, SGD, Adagrad)"),
        KnobSpec("matmul_precision", str, MATMUL_PRECISIONS, "fp32 matmul precision; auto follows precision"),
    )
}

_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


def _coerce(spec: KnobSpec, value: Any) -> Any:
    """Turn a CLI string or a YAML value into the knob's type, or say what is wrong with it."""
    if value is None and spec.kind is bool:
        return None
    if spec.kind is bool:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in _TRUE | _FALSE:
            return text in _TRUE
    elif spec.kind is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        with contextlib.suppress(ValueError):
            return int(str(value).strip())
    elif spec.kind is str and (spec.choices is None or str(value) in spec.choices):
        return str(value)
    allowed = ", ".join(str(c).lower() for c in spec.choices) if spec.choices else f"an {spec.kind.__name__}"
    raise AutotuneError(f"knob {spec.name}={value!r} is not valid: expected {allowed}")


@dataclass(frozen=True)
class Knobs:
    """A full knob setting. ``None`` for a cuDNN flag means PyTorch's own default, untouched."""

    batch_size: int | None = None
    precision: str = "default"
    memory_format: str = "contiguous"
    compile_mode: str = "none"
    cudnn_benchmark: bool | None = None
    cudnn_deterministic: bool | None = None
    fused_optimizer: bool = False
    matmul_precision: str = "auto"

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> Knobs:
        """Knobs from a ``{name: value}`` mapping (strings allowed); unknown names are errors."""
        values: dict[str, Any] = {}
        for name, raw in params.items():
            spec = KNOB_SPECS.get(name)
            if spec is None:
                raise AutotuneError(f"unknown knob {name!r}; knobs are: {', '.join(KNOB_SPECS)}")
            values[name] = _coerce(spec, raw)
        knobs = cls(**values)
        if knobs.batch_size is not None and knobs.batch_size < 1:
            raise AutotuneError(f"knob batch_size={knobs.batch_size} is not valid: expected a positive int")
        return knobs

    def to_params(self) -> dict[str, Any]:
        """All knobs as a plain dict (the ``params`` of a TrialResult and of a tuned config)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def check_combination(self, device_type: str) -> None:
        """Raise :class:`InvalidCombination` when legal values cannot run together."""
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
        torch.backends.cudnn.conv.fp32_precision = tf32
        torch.backends.cudnn.rnn.fp32_precision = tf32
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
    optimizer._step_supports_amp_scaling = True  # type: ignore[attr-defined]


@dataclass
class StepContext:
    """What a training step needs from the knobs: input layout, autocast and (fp16) a grad scaler.

    A training step with it::

        with step_ctx.autocast():
            loss = loss_fn(model(step_ctx.prepare_inputs(x)), y)
        step_ctx.backward(loss)
        step_ctx.step(optimizer)
        optimizer.zero_grad(set_to_none=True)
    """

    device_type: str
    autocast_dtype: torch.dtype | None = None
    channels_last_inputs: bool = False
    cudagraphs: bool = False
    scaler: torch.amp.GradScaler | None = None
    noops: list[str] = field(default_factory=list)

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

    def step(self, optimizer: torch.optim.Optimizer) -> None:
        if self.scaler is None:
            optimizer.step()
            return
        self.scaler.step(optimizer)
        self.scaler.update()


def apply(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer | None,
    knobs: Knobs,
    device_type: str,
    compile_fn: Callable[..., Any] = torch.compile,
) -> tuple[torch.nn.Module, StepContext]:
    """Apply every knob: backend flags, memory format, optimizer, compile; return the model to train.

    Raises :class:`InvalidCombination` for settings that cannot run together.
    """
    knobs.check_combination(device_type)
    noops = apply_backend_flags(knobs, device_type)
    channels_last = knobs.memory_format == "channels_last"
    if channels_last and not _has_4d_weights(model):
        noops.append("memory_format")  # no 4-D weights (e.g. a transformer): nothing to re-lay out
        channels_last = False
    if channels_last:
        model = model.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
    if knobs.fused_optimizer and optimizer is not None:
        _set_fused(optimizer)
    cudagraphs = knobs.compile_mode in CUDAGRAPH_MODES
    if cudagraphs and device_type != "cuda":
        noops.append("cudagraphs")  # CUDA graphs need a GPU; inductor runs without them here
        cudagraphs = False
    if knobs.compile_mode != "none":
        model = compile_fn(model, mode=knobs.compile_mode)
    dtype = AUTOCAST_DTYPES.get(knobs.precision)
    scaler = torch.amp.GradScaler(device_type) if knobs.precision == "fp16" else None
    ctx = StepContext(device_type, dtype, channels_last, cudagraphs, scaler, noops)
    return model, ctx


@contextlib.contextmanager
def strict_fp32() -> Iterator[None]:
    """Strict IEEE fp32 for the duration (the numerics guard's reference pass), flags restored after."""
    saved = (
        torch.backends.cuda.matmul.fp32_precision,
        torch.backends.cudnn.conv.fp32_precision,
    )
    torch.backends.cuda.matmul.fp32_precision = "ieee"
    torch.backends.cudnn.conv.fp32_precision = "ieee"
    try:
        yield
    finally:
        torch.backends.cuda.matmul.fp32_precision, torch.backends.cudnn.conv.fp32_precision = saved
