"""Tuned knobs as arguments of the frameworks people train in: Hugging Face and Lightning.

Production code hands a tuned config's ``knobs`` and ``kernels`` sections to the framework (``TunedConfig``'s
``hf_training_args()`` and ``lightning_trainer_kwargs()`` do this)::

    args = TrainingArguments(output_dir="out", **hf_training_args(cfg.knobs, kernels=cfg.kernels))
    trainer = lightning.Trainer(**lightning_trainer_kwargs(cfg.knobs, kernels=cfg.kernels))

A knob at PyTorch's default maps to nothing, so the framework keeps its own default: the file cannot tell a knob
searched and rejected from one never searched. A knob the framework cannot express is named in one
:class:`FrameworkWarning`, with what to do instead; none is dropped silently.

``TrainingArguments`` expresses precision, TF32, torch.compile and its mode, the fused AdamW (the optimizer every
trial used), full activation checkpointing, the batch size, the DataLoader settings and non-blocking copies; the
attention kernel and the compiler's memory budget are the step context's (``cfg.apply(model)``). Neither framework
compiles a model's blocks one by one (``compile_scope=blocks``): ``torch_compile`` compiles the whole model, so with
that scope both knobs are named in the warning, with ``cfg.apply(model)`` (which compiles the blocks in place) to do
instead.
Lightning's ``Trainer`` expresses mixed precision and ``cudnn.benchmark`` only: torch.compile, channels_last and the
backend flags are the user's (``cfg.apply(model)`` on the LightningModule), so are the fused optimizer
(``configure_optimizers``) and the DataLoader (``cfg.dataloader(dataset)``).
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Mapping
from typing import Any

from autotune.knobs.registry import Knobs

__all__ = ["FrameworkWarning", "hf_training_args", "lightning_trainer_kwargs"]


class FrameworkWarning(UserWarning):
    """Tuned settings a framework cannot express: ``unexpressed`` names them, the message says what to do."""

    def __init__(self, message: str, unexpressed: tuple[str, ...]) -> None:
        super().__init__(message)
        self.unexpressed = unexpressed


# A knob at PyTorch's default needs neither an argument nor a warning: the registry's defaults, where a cuDNN flag's
# None (untouched) is PyTorch's False.
_PYTORCH_DEFAULTS: dict[str, Any] = {**Knobs().to_params(), "cudnn_benchmark": False, "cudnn_deterministic": False}
# They act on worker processes only: without any, the trials recorded them as no-ops (the DataLoader refuses them).
_WORKER_ONLY = ("prefetch_factor", "persistent_workers")

# How a framework expresses one knob: (value, all tuned knobs) -> its keyword arguments, or None if it cannot.
Express = Callable[[Any, Mapping[str, Any]], dict[str, Any] | None]

_HF_PRECISION = {"bf16": {"bf16": True}, "fp16": {"fp16": True}, "tf32": {"tf32": True}, "fp32": {"tf32": False}}


def _hf_matmul_precision(value: str, tuned: Mapping[str, Any]) -> dict[str, Any] | None:
    # TrainingArguments' tf32 switches matmuls and cuDNN together. "high" is TF32 matmuls with cuDNN at its default,
    # which is TF32 already; "highest" with cuDNN's TF32 kept has no switch, unless precision=fp32 turns both off.
    if value == "high":
        return {"tf32": True}
    return {"tf32": False} if tuned["precision"] == "fp32" else None


def _hf_checkpointing(value: str) -> dict[str, Any] | None:
    # The Trainer checkpoints each transformers layer whole, non-reentrant as the trials did; selective is cfg.apply's.
    # transformers renamed gradient_checkpointing to activation_checkpointing (the installed 5.25 warns for the old
    # name); one older than the rename takes the old name only.
    if value != "full":
        return None
    from transformers import TrainingArguments  # deferred: only a config that checkpoints needs it here

    renamed = "activation_checkpointing" in {field.name for field in dataclasses.fields(TrainingArguments)}
    name = "activation_checkpointing" if renamed else "gradient_checkpointing"
    return {name: True, f"{name}_kwargs": {"use_reentrant": False}}


_HF: dict[str, Express] = {
    "batch_size": lambda v, _: {"per_device_train_batch_size": v},
    "precision": lambda v, _: _HF_PRECISION[v],
    "matmul_precision": _hf_matmul_precision,
    # With tf32 unset, TrainingArguments turns TF32 on when compiling (unless fp16) on a GPU that has it: faster
    # than the measured IEEE matmuls; tf32=False would also turn off cuDNN's TF32, which the trial had on.
    # torch_compile compiles the whole model: compile_scope=blocks is the user's (cfg.apply), said in the warning.
    "compile_mode": lambda v, tuned: (
        {"torch_compile": True, "torch_compile_mode": v} if tuned["compile_scope"] == "model" else None
    ),
    "fused_optimizer": lambda v, _: {"optim": "adamw_torch_fused"},  # every trial trains with AdamW
    "activation_checkpointing": lambda v, _: _hf_checkpointing(v),
    "num_workers": lambda v, _: {"dataloader_num_workers": v},
    "pin_memory": lambda v, _: {"dataloader_pin_memory": v},
    "prefetch_factor": lambda v, _: {"dataloader_prefetch_factor": v},
    "persistent_workers": lambda v, _: {"dataloader_persistent_workers": v},
    "non_blocking": lambda v, _: {"accelerator_config": {"non_blocking": v}},
    "ddp_bucket_cap_mb": lambda v, _: {"ddp_bucket_cap_mb": v},  # the Trainer wraps the model in DDP under torchrun
}

_LIGHTNING_PRECISION = {"bf16": "bf16-mixed", "fp16": "16-mixed"}  # fp32/tf32 are "32-true", its default
_LIGHTNING: dict[str, Express] = {
    "precision": lambda v, _: {"precision": _LIGHTNING_PRECISION[v]} if v in _LIGHTNING_PRECISION else None,
    "cudnn_benchmark": lambda v, _: {"benchmark": v},
    # Trainer's deterministic=True is torch.use_deterministic_algorithms, far more than cudnn.deterministic.
    "non_blocking": lambda v, _: {},  # Lightning copies every batch to a GPU with non_blocking=True itself
}

_BACKEND_FLAGS = "autotune.knobs.apply_backend_flags(cfg.to_knobs(), 'cuda')"
_LOADER = "cfg.dataloader(dataset)"
# compile_scope=blocks, and the mode with it (the framework's own compile would take the whole model).
_BLOCKS = "cfg.apply(model) (it compiles each repeated block in place; leave the framework's torch.compile off)"
# float8 and its layer filter: the trials' Linear layers converted, before the framework compiles the model.
_FLOAT8 = "model, _ = autotune.knobs.apply_float8(model, cfg.to_knobs(), 'cuda') before the framework compiles it"
# The data-parallel wrapper, as the trial's ranks built it (the framework's own DDP or FSDP left off).
_WRAP = "cfg.apply(model, optimizer) in every torchrun rank (it wraps the model as the trial's ranks did)"
# What the user does instead, per knob ({value} is the knob's).
_BY_HAND: dict[str, str] = {
    "batch_size": _LOADER,
    "precision": _BACKEND_FLAGS,
    "float8": _FLOAT8,
    "float8_filter": _FLOAT8,
    "memory_format": "model.to(memory_format=torch.channels_last)",
    "compile_mode": "torch.compile(model, mode='{value}')",
    "compile_scope": _BLOCKS,
    "activation_checkpointing": "cfg.apply(model) (it wraps each repeated block's forward in place)",
    "activation_memory_budget": "cfg.apply(model); its step_ctx.autocast() sets the budget while the model compiles",
    "attention_backend": "cfg.apply(model); its step_ctx.autocast() and step_ctx.backward() pin the kernel",
    "cudnn_benchmark": _BACKEND_FLAGS,
    "cudnn_deterministic": _BACKEND_FLAGS,
    "fused_optimizer": "fused=True on the optimizer configure_optimizers returns",
    "matmul_precision": _BACKEND_FLAGS,
    "num_workers": _LOADER,
    "pin_memory": _LOADER,
    "prefetch_factor": _LOADER,
    "persistent_workers": _LOADER,
    "gpu_prefetch": "no equivalent: the framework copies each batch on the current CUDA stream",
    "data_parallel": _WRAP,
    "ddp_bucket_cap_mb": _WRAP,
    "ddp_gradient_as_bucket_view": _WRAP,
    "ddp_static_graph": _WRAP,
    "fsdp_reshard_after_forward": _WRAP,
}
_PIN_KERNELS = "autotune.kernels.pinning.pin_tuned(cfg.kernels)"


def hf_training_args(knobs: Mapping[str, Any], *, kernels: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Keyword arguments for ``transformers.TrainingArguments`` that reproduce the tuned knobs.

    ``knobs`` is a tuned config's ``knobs`` mapping; ``kernels`` its ``kernels`` section (listed Triton kernels are
    named in the warning: TrainingArguments cannot pin them). Warns :class:`FrameworkWarning` for what the
    arguments cannot express; raises :class:`AutotuneError` for an unknown knob or a bad value.
    """
    kwargs, unexpressed = _express(_tuned(knobs), _HF)
    if warning := _unexpressed_warning("transformers.TrainingArguments", unexpressed, kernels):
        warnings.warn(warning, stacklevel=3)  # points at the caller of cfg.hf_training_args()
    return kwargs


def lightning_trainer_kwargs(knobs: Mapping[str, Any], *, kernels: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Keyword arguments for ``lightning.Trainer`` (precision, cudnn.benchmark) that reproduce the tuned knobs.

    Lightning leaves torch.compile, channels_last, the backend flags, the fused optimizer and the DataLoader to
    the user: those knobs are named in one :class:`FrameworkWarning` with what to do; ``kernels`` as in
    :func:`hf_training_args`.
    """
    kwargs, unexpressed = _express(_tuned(knobs), _LIGHTNING)
    if warning := _unexpressed_warning("lightning.Trainer", unexpressed, kernels):
        warnings.warn(warning, stacklevel=3)  # points at the caller of cfg.lightning_trainer_kwargs()
    return kwargs


def _tuned(knobs: Mapping[str, Any]) -> dict[str, Any]:
    """Every knob, typed and validated by the knob registry (unknown names raise), absent ones at their defaults."""
    return Knobs.from_params({name: value for name, value in knobs.items() if value is not None}).to_params()


def _express(tuned: Mapping[str, Any], framework: Mapping[str, Express]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The framework's keyword arguments, and the knobs (name -> value) it cannot express."""
    kwargs: dict[str, Any] = {}
    unexpressed: dict[str, Any] = {}
    for name, value in tuned.items():
        at_default = value is None or value == _PYTORCH_DEFAULTS[name]
        if at_default or (name in _WORKER_ONLY and not tuned["num_workers"]):
            continue
        expressed = framework[name](value, tuned) if name in framework else None
        if expressed is None:
            unexpressed[name] = value
        else:
            kwargs.update(expressed)
    return kwargs, unexpressed


def _unexpressed_warning(
    target: str, knobs: Mapping[str, Any], kernels: Mapping[str, Any] | None
) -> FrameworkWarning | None:
    """One warning naming every knob and listed kernel ``target`` cannot express, grouped by what to do instead."""
    todo: dict[str, list[str]] = {}  # what to do -> the settings it covers, in knob order
    blocks = knobs.get("compile_scope") == "blocks"
    for name, value in knobs.items():
        by_hand = _BY_HAND.get(name, "no equivalent known to autotune").format(value=value)
        if blocks and name == "compile_mode":
            by_hand = _BLOCKS  # one compile, of the blocks: said once, for both knobs
        todo.setdefault(by_hand, []).append(f"{name}={value}")
    # The import-path keys are a space's listed kernels; the built-in matmul's block sizes are no model's setting.
    listed = [path for path in kernels or {} if ":" in path]
    if listed:
        todo[_PIN_KERNELS] = [f"kernel {path}" for path in listed]
    if not todo:
        return None
    steps = "; ".join(f"{', '.join(settings)} -> {by_hand}" for by_hand, settings in todo.items())
    return FrameworkWarning(
        f"{target} cannot express these tuned settings; set them yourself: {steps}", (*knobs, *listed)
    )
