"""The one place where the knobs are applied: :func:`apply` walks the families in order.

The trial job and production ``autotune.load(...).apply(model, optimizer)`` both call it, so the configuration that
was measured is exactly the one that ships.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from autotune.knobs import assembler, backends, data_parallel, float8, fsdp, precision, regional
from autotune.knobs.checkpointing import checkpoint_blocks
from autotune.knobs.compile import compile_model
from autotune.knobs.memory_format import lay_out
from autotune.knobs.optimizer import set_fused
from autotune.knobs.registry import Knobs
from autotune.knobs.stepcontext import StepContext

__all__ = ["apply", "apply_backend_flags", "apply_float8"]


def apply(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer | None,
    knobs: Knobs,
    device_type: str,
    compile_fn: Callable[..., Any] = torch.compile,
) -> tuple[torch.nn.Module, StepContext]:
    """Apply every knob: float8, backend flags, memory format, optimizer, activation checkpointing, compile, data
    parallelism; return the model to train. The attention kernel and the activation memory budget are the step
    context's, entered every step.

    ``float8`` converts the model's Linear layers in place before anything lays out, wraps or compiles them (the step
    context's ``float8_layers`` names them); they keep their parameters, so ``optimizer`` trains them still. The
    model's repeated blocks are found once (:func:`autotune.knobs.regional.find_blocks`), for activation
    checkpointing and ``compile_scope=blocks`` alike. Activation checkpointing wraps the forward of each block in
    place, before the compile traces it; a model without repeated blocks raises
    :class:`~autotune.errors.AutotuneError`. With ``compile_scope=blocks`` the model returned is ``model`` itself (its
    class, its ``state_dict`` keys), its repeated blocks compiled in place; the step context's ``blocks`` says which.
    ``data_parallel`` (:mod:`autotune.knobs.data_parallel`) needs torch.distributed initialised in every rank (a
    trial's ranks, or torchrun): ``ddp`` returns the model in DistributedDataParallel (compiled around it), ``fsdp``
    shards ``model`` in place, block by block, and points ``optimizer`` at the sharded parameters.
    Raises :class:`~autotune.errors.InvalidCombination` for settings that cannot run together.
    """
    knobs.check_combination(device_type)
    model, float8_layers = float8.convert(model, knobs.float8, knobs.float8_layers, device_type)
    assembler.pin()  # before anything compiles: the trial's and production's Triton keys then agree
    noops = backends.set_flags(
        knobs.cudnn_benchmark, knobs.cudnn_deterministic, knobs.precision, knobs.matmul_precision, device_type
    )
    model, channels_last, unlaid = lay_out(model, knobs.memory_format)
    if knobs.fused_optimizer and optimizer is not None:
        set_fused(optimizer)
    uses_blocks = knobs.activation_checkpointing != "none" or knobs.compile_scope == "blocks"
    uses_blocks = uses_blocks or knobs.data_parallel == "fsdp"
    blocks = regional.find_blocks(model) if uses_blocks else None  # found once: checkpointing's, compile's, FSDP's
    checkpointed = checkpoint_blocks(blocks, knobs.activation_checkpointing) if blocks is not None else None
    scoped = blocks if knobs.compile_scope == "blocks" else None
    replicated = data_parallel.wrap_ddp(model, knobs.ddp, device_type) if knobs.data_parallel == "ddp" else model
    compiled = compile_model(replicated, knobs.compile_mode, scoped, knobs.inductor_options, device_type, compile_fn)
    if knobs.data_parallel == "fsdp":  # over the compiled blocks, in place (a whole-model compile wraps it still)
        shard_units = blocks.modules if blocks else ()
        fsdp.shard(model, shard_units, knobs.fsdp_reshard_after_forward, optimizer, device_type)
    dtype = precision.autocast_dtype(knobs.precision)
    scaler = precision.grad_scaler(knobs.precision, device_type)
    noops += unlaid + compiled.noops
    if knobs.float8 != "none" and not float8_layers:
        noops.append("float8")  # no Linear layer passed the filter: the model trains as without it
    ctx = StepContext(
        device_type,
        dtype,
        channels_last,
        compiled.cudagraphs,
        scaler,
        noops,
        optimizer,
        compiled.blocks,
        checkpointed=checkpointed,
        attention_backend=knobs.attention_backend,
        activation_memory_budget=knobs.activation_memory_budget,
        float8_layers=float8_layers if knobs.float8 != "none" else None,
    )
    return compiled.model, ctx


def apply_backend_flags(knobs: Knobs, device_type: str) -> list[str]:
    """Set the process-wide backend flags the knobs ask for (:mod:`autotune.knobs.backends`); return the knobs
    that were no-ops."""
    return backends.set_flags(
        knobs.cudnn_benchmark, knobs.cudnn_deterministic, knobs.precision, knobs.matmul_precision, device_type
    )


def apply_float8(model: torch.nn.Module, knobs: Knobs, device_type: str) -> tuple[torch.nn.Module, tuple[str, ...]]:
    """Convert the Linear layers ``knobs.float8`` and ``knobs.float8_filter`` choose to float8 training
    (:mod:`autotune.knobs.float8`), as :func:`apply` does; return the model and the names of the layers converted.
    For a training loop that compiles the model itself: call it before compiling."""
    return float8.convert(model, knobs.float8, knobs.float8_layers, device_type)
